// host:port parsing, secrets from env or 0600 files, atomic file writes.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/util/daemon_target.h"
#include "common/util/files.h"
#include "common/util/host_port.h"
#include "common/util/secret.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::util {
namespace {

TEST_CASE("ParseHostPort accepts host:port and [v6]:port", "[util]") {
  auto a = ParseHostPort("127.0.0.1:0");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 0);
  auto b = ParseHostPort("[::1]:50151");
  REQUIRE(b.ok());
  CHECK(b->host == "::1");
  CHECK(b->port == 50151);
  for (const char* bad :
       {"localhost", "host:", ":80", "h:65536", "h:-1", "h:8x", "::1:80"}) {
    INFO(bad);
    CHECK(absl::IsInvalidArgument(ParseHostPort(bad).status()));
  }
}

TEST_CASE("LoadSecret reads env, refuses loose files, never echoes the value",
          "[util]") {
  auto none = LoadSecret("", "", "auth");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  setenv("MESA_TEST_SECRET", "s3cret-token\n", 1);
  auto env = LoadSecret("MESA_TEST_SECRET", "", "auth");
  REQUIRE(env.ok());
  CHECK(**env == "s3cret-token");
  unsetenv("MESA_TEST_SECRET");
  auto unset = LoadSecret("MESA_TEST_SECRET", "", "auth");
  CHECK(absl::IsInvalidArgument(unset.status()));
  CHECK_THAT(std::string(unset.status().message()),
             Catch::Contains("MESA_TEST_SECRET"));

  const testing::TempDir temp;
  const std::filesystem::path dir = temp.path();
  const std::string file = (dir / "token").string();
  std::ofstream(file) << "file-token-value\n";
  chmod(file.c_str(), 0644);
  auto loose = LoadSecret("", file, "auth");
  REQUIRE(absl::IsInvalidArgument(loose.status()));
  CHECK_THAT(std::string(loose.status().message()), Catch::Contains("0644"));
  CHECK_THAT(std::string(loose.status().message()),
             !Catch::Contains("file-token-value"));
  chmod(file.c_str(), 0600);
  auto tight = LoadSecret("", file, "auth");
  REQUIRE(tight.ok());
  CHECK(**tight == "file-token-value");
  CHECK(absl::IsInvalidArgument(
      LoadSecret("", (dir / "missing").string(), "auth").status()));
}

TEST_CASE("WriteFileAtomic replaces whole content and leaves no temp files",
          "[util]") {
  const testing::TempDir temp;
  const std::filesystem::path dir = temp.path();
  const std::string path = (dir / "port").string();
  REQUIRE(WriteFileAtomic(path, "123\n").ok());
  REQUIRE(WriteFileAtomic(path, "45678\n").ok());
  auto read = ReadFile(path);
  REQUIRE(read.ok());
  CHECK(*read == "45678\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator(dir)) {
    ++entries;
  }
  CHECK(entries == 1);
  CHECK(absl::IsNotFound(ReadFile((dir / "nope").string()).status()));
  CHECK_FALSE(
      WriteFileAtomic((dir / "no" / "such" / "dir").string(), "x").ok());
}

TEST_CASE("AffinityKey is FNV-1a 64 over the first bytes", "[util]") {
  // Published FNV-1a 64 test vectors.
  CHECK(AffinityKey("a", 256) == "af63dc4c8601ec8c");
  CHECK(AffinityKey("foobar", 256) == "85944171f73967e8");
  // Only the first `bytes` count; 0 bytes or no text sends no key.
  CHECK(AffinityKey("foobar and more", 6) == "85944171f73967e8");
  CHECK(AffinityKey("foobar", 0).empty());
  CHECK(AffinityKey("", 256).empty());
}

}  // namespace
}  // namespace mesa_anyjev::util
