// MemAvailable from /proc/meminfo text (common/util/meminfo.h).
#include "common/util/meminfo.h"

#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::util {
namespace {

// As a GB10 after writing a 60 GB file: MemFree low, MemAvailable not.
constexpr char kMeminfo[] =
    "MemTotal:       128455344 kB\n"
    "MemFree:        43507712 kB\n"
    "MemAvailable:   108003328 kB\n"
    "Buffers:          104448 kB\n"
    "Cached:         62914560 kB\n";

TEST_CASE("ParseMemAvailable reads MemAvailable, not MemFree", "[meminfo]") {
  auto bytes = ParseMemAvailable(kMeminfo);
  REQUIRE(bytes.ok());
  CHECK(*bytes == int64_t{108003328} * 1024);
}

TEST_CASE("ParseMemAvailable refuses text without a well-formed line",
          "[meminfo]") {
  for (const char* bad :
       {"", "MemTotal: 1 kB\nMemFree: 1 kB\n", "MemAvailable: 12\n",
        "MemAvailable: x kB\n", "MemAvailable: -5 kB\n",
        "MemAvailable: 99999999999999999999 kB\n",
        "MemAvailable: 9223372036854775807 kB\n"}) {
    INFO(bad);
    auto bytes = ParseMemAvailable(bad);
    REQUIRE_FALSE(bytes.ok());
    CHECK(bytes.status().message().find("MemAvailable") != std::string::npos);
  }
}

TEST_CASE("ReadMemAvailable reads a file and names it in errors", "[meminfo]") {
  testing::TempDir dir;
  const std::string good = dir.Write("meminfo", kMeminfo);
  auto bytes = ReadMemAvailable(good);
  REQUIRE(bytes.ok());
  CHECK(*bytes == int64_t{108003328} * 1024);
  const std::string bad = dir.Write("bad", "MemFree: 1 kB\n");
  auto refused = ReadMemAvailable(bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find(bad) != std::string::npos);
  CHECK(absl::IsNotFound(ReadMemAvailable(dir.Path("none")).status()));
  // This host's own.
  auto here = ReadMemAvailable();
  REQUIRE(here.ok());
  CHECK(*here > 0);
}

}  // namespace
}  // namespace mesa_anyjev::util
