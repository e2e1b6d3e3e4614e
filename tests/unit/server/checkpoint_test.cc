// Checkpoint over generated Hugging Face directories: one file, three shards
// with an index, every index/shard disagreement, escapes out of the
// directory, and the fingerprint's contract (config + headers, not bytes).
#include "server/model/checkpoint.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/hash.h"
#include "tests/unit/server/safetensors_writer.h"

namespace mesa_anyjev::model {
namespace {

using Catch::Contains;
using testing::F32Bytes;
using testing::TempDir;
using testing::TestTensor;
using testing::U64Le;
using testing::WriteTensors;

constexpr char kConfig[] = "{\"model_type\": \"qwen3\", \"hidden_size\": 4}\n";
const char* const kShard1 = "model-00001-of-00003.safetensors";
const char* const kShard2 = "model-00002-of-00003.safetensors";
const char* const kShard3 = "model-00003-of-00003.safetensors";

TestTensor F32(const std::string& name, int n, float start = 0.0f) {
  return TestTensor{
      name, "F32", {static_cast<uint64_t>(n)}, F32Bytes(n, start)};
}

// An index in transformers' layout for `weight_map` (tensor, file) pairs.
std::string Index(
    const std::vector<std::pair<std::string, std::string>>& weight_map) {
  std::string entries;
  for (const auto& [tensor, file] : weight_map) {
    absl::StrAppend(&entries, entries.empty() ? "" : ",", "\"", tensor, "\":\"",
                    file, "\"");
  }
  return absl::StrCat("{\"metadata\":{\"total_size\":0},\"weight_map\":{",
                      entries, "}}");
}

// config.json and three shards of two tensors each, with a matching index.
void WriteSharded(const TempDir& dir) {
  dir.Write("config.json", kConfig);
  dir.Write(kShard1, WriteTensors({F32("embed", 6), F32("layer0.w", 2, 10)}));
  dir.Write(kShard2, WriteTensors({F32("layer1.w", 3, 20), F32("norm", 1)}));
  dir.Write(kShard3, WriteTensors({F32("lm_head", 4, 30),
                                   TestTensor{"pos", "I64", {}, U64Le(5)}}));
  dir.Write(Checkpoint::kIndexName.data(), Index({{"embed", kShard1},
                                                  {"layer0.w", kShard1},
                                                  {"layer1.w", kShard2},
                                                  {"norm", kShard2},
                                                  {"lm_head", kShard3},
                                                  {"pos", kShard3}}));
}

// Open must fail with `code` and a message containing every `parts`.
void CheckRefused(const std::string& dir, absl::StatusCode code,
                  const std::vector<std::string>& parts) {
  const auto checkpoint = Checkpoint::Open(dir);
  REQUIRE_FALSE(checkpoint.ok());
  const std::string message(checkpoint.status().message());
  INFO(message);
  CHECK(checkpoint.status().code() == code);
  for (const std::string& part : parts) {
    CHECK_THAT(message, Contains(part));
  }
}

TEST_CASE("checkpoint: a single model.safetensors", "[checkpoint]") {
  TempDir dir;
  dir.Write("config.json", kConfig);
  dir.Write("model.safetensors", WriteTensors({F32("b", 2, 1), F32("a", 3, 5)},
                                              "{\"format\":\"pt\"}"));
  auto opened = Checkpoint::Open(dir.path());
  REQUIRE(opened.ok());
  const Checkpoint& checkpoint = **opened;
  CHECK(checkpoint.names() == std::vector<std::string>{"a", "b"});
  CHECK(checkpoint.config_json() == kConfig);
  CHECK(checkpoint.total_bytes() == 20);
  REQUIRE(checkpoint.shards().size() == 1);
  const TensorView* a = checkpoint.Find("a");
  REQUIRE(a != nullptr);
  CHECK(std::string_view(reinterpret_cast<const char*>(a->data), a->nbytes) ==
        F32Bytes(3, 5));
  CHECK(checkpoint.ShardOf("a") == checkpoint.shards()[0].get());
  CHECK(checkpoint.Find("c") == nullptr);
  CHECK(checkpoint.ShardOf("c") == nullptr);
  CHECK(checkpoint.Fingerprint().size() == 64);
}

TEST_CASE("checkpoint: three shards with an index", "[checkpoint]") {
  TempDir dir;
  WriteSharded(dir);
  auto opened = Checkpoint::Open(dir.path());
  REQUIRE(opened.ok());
  const Checkpoint& checkpoint = **opened;
  CHECK(checkpoint.names() == std::vector<std::string>{"embed", "layer0.w",
                                                       "layer1.w", "lm_head",
                                                       "norm", "pos"});
  REQUIRE(checkpoint.shards().size() == 3);
  CHECK_THAT(checkpoint.shards()[0]->path(), Contains(kShard1));
  CHECK_THAT(checkpoint.shards()[2]->path(), Contains(kShard3));
  CHECK(checkpoint.ShardOf("norm") == checkpoint.shards()[1].get());
  const TensorView* lm_head = checkpoint.Find("lm_head");
  REQUIRE(lm_head != nullptr);
  CHECK(std::string_view(reinterpret_cast<const char*>(lm_head->data),
                         lm_head->nbytes) == F32Bytes(4, 30));
  CHECK(checkpoint.Find("pos")->dtype == DType::kI64);
  CHECK(checkpoint.total_bytes() == (6 + 2 + 3 + 1 + 4) * 4 + 8);
}

TEST_CASE("checkpoint: index and shards must agree", "[checkpoint]") {
  const std::string index = Checkpoint::kIndexName.data();
  SECTION("a listed tensor missing from its shard") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write(kShard2, WriteTensors({F32("layer1.w", 3, 20)}));
    CheckRefused(
        dir.path(), absl::StatusCode::kInvalidArgument,
        {dir.path(), "tensor 'norm' is listed in " + index + " for " + kShard2 +
                         " but " + kShard2 + " does not have it"});
  }
  SECTION("a tensor in a shard the index does not list") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write(kShard1, WriteTensors({F32("embed", 6), F32("layer0.w", 2, 10),
                                     F32("extra", 1)}));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"tensor 'extra' in " + std::string(kShard1) +
                  " is not listed in " + index});
  }
  SECTION("a tensor in two shards") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write(kShard3, WriteTensors({F32("lm_head", 4, 30), F32("norm", 1),
                                     TestTensor{"pos", "I64", {}, U64Le(5)}}));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"tensor 'norm' is in both " + std::string(kShard2) + " and " +
                  kShard3});
  }
  SECTION("the index names the wrong shard") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write(index, Index({{"embed", kShard1},
                            {"layer0.w", kShard2},
                            {"layer1.w", kShard2},
                            {"norm", kShard2},
                            {"lm_head", kShard3},
                            {"pos", kShard3}}));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"tensor 'layer0.w' is listed in " + index + " for " +
                  kShard2 + " but is in " + kShard1});
  }
  SECTION("the index names a shard that is not there") {
    TempDir dir;
    WriteSharded(dir);
    std::filesystem::remove(dir.Path(kShard3));
    CheckRefused(dir.path(), absl::StatusCode::kNotFound,
                 {"shard '" + std::string(kShard3) + "' (named in " + index +
                  ") is missing"});
  }
  SECTION("an empty weight_map") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write(index, Index({}));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"the checkpoint holds no tensors"});
  }
  SECTION("a malformed shard names its file and tensor") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write(kShard2, testing::SafetensorsBytes(
                           "{" + testing::Entry("norm", "F32", {2}, 0, 4) + "}",
                           F32Bytes(1)));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {dir.Path(kShard2) + ": tensor 'norm': data_offsets [0, 4]"});
  }
}

TEST_CASE("checkpoint: malformed indexes", "[checkpoint]") {
  const std::string index = Checkpoint::kIndexName.data();
  struct Case {
    std::string what;
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"not JSON", "{", "not valid JSON"},
      {"not an object", "[]", "not a JSON object"},
      {"no weight_map", "{\"metadata\":{}}", "no weight_map object"},
      {"duplicate tensor", "{\"weight_map\":{\"a\":\"x\",\"a\":\"y\"}}",
       "duplicate key 'a'"},
      {"file not a string", "{\"weight_map\":{\"a\":1}}",
       "weight_map entry 'a' is not a file name string"},
      {"../ escape", Index({{"embed", "../outside.safetensors"}}),
       "weight_map entry 'embed' names '../outside.safetensors', not a plain "
       "file name inside the directory"},
      {"absolute path", Index({{"embed", "/etc/passwd"}}),
       "names '/etc/passwd', not a plain file name"},
      {"dot-dot", Index({{"embed", ".."}}), "names '..', not a plain"},
      {"subfolder", Index({{"embed", "sub/model.safetensors"}}),
       "names 'sub/model.safetensors', not a plain"},
      {"empty name", Index({{"embed", ""}}), "names '', not a plain"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    TempDir dir;
    WriteSharded(dir);
    dir.Write(index, c.text);
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {dir.Path(index) + ": ", c.expected});
  }
}

TEST_CASE("checkpoint: required files and ambiguity", "[checkpoint]") {
  SECTION("config.json missing") {
    TempDir dir;
    dir.Write("model.safetensors", WriteTensors({F32("a", 1)}));
    CheckRefused(dir.path(), absl::StatusCode::kNotFound,
                 {dir.path() + ": config.json is missing"});
  }
  SECTION("no weights") {
    TempDir dir;
    dir.Write("config.json", kConfig);
    CheckRefused(dir.path(), absl::StatusCode::kNotFound,
                 {"neither model.safetensors nor "
                  "model.safetensors.index.json is present"});
  }
  SECTION("both layouts at once") {
    TempDir dir;
    WriteSharded(dir);
    dir.Write("model.safetensors", WriteTensors({F32("a", 1)}));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"both model.safetensors and model.safetensors.index.json"});
  }
  SECTION("not a directory") {
    TempDir dir;
    const std::string file = dir.Write("config.json", kConfig);
    CheckRefused(file, absl::StatusCode::kInvalidArgument, {"not a directory"});
    CheckRefused(dir.Path("absent"), absl::StatusCode::kNotFound,
                 {"model directory " + dir.Path("absent")});
  }
}

TEST_CASE("checkpoint: symlinks stay inside the directory", "[checkpoint]") {
  TempDir outside;
  const std::string elsewhere =
      outside.Write("elsewhere.safetensors", WriteTensors({F32("a", 1)}));
  const std::string other_config = outside.Write("config.json", kConfig);
  SECTION("a shard linking outside") {
    TempDir dir;
    dir.Write("config.json", kConfig);
    std::filesystem::create_symlink(elsewhere, dir.Path("model.safetensors"));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"model.safetensors is a symlink to " + elsewhere +
                  ", outside the model directory"});
  }
  SECTION("config.json linking outside") {
    TempDir dir;
    dir.Write("model.safetensors", WriteTensors({F32("a", 1)}));
    std::filesystem::create_symlink(other_config, dir.Path("config.json"));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"config.json is a symlink to"});
  }
  SECTION("a relative ../ link") {
    TempDir dir;
    WriteSharded(dir);
    std::filesystem::remove(dir.Path(kShard2));
    std::filesystem::create_symlink(
        std::filesystem::path("..") /
            std::filesystem::path(outside.path()).filename() /
            "elsewhere.safetensors",
        dir.Path(kShard2));
    CheckRefused(dir.path(), absl::StatusCode::kInvalidArgument,
                 {"shard '" + std::string(kShard2) + "'",
                  "outside the model directory"});
  }
  SECTION("a dangling link") {
    TempDir dir;
    dir.Write("config.json", kConfig);
    std::filesystem::create_symlink(dir.Path("gone"),
                                    dir.Path("model.safetensors"));
    CheckRefused(dir.path(), absl::StatusCode::kNotFound,
                 {"model.safetensors is a symlink that does not resolve"});
  }
  SECTION("a link inside the directory is fine") {
    TempDir dir;
    dir.Write("config.json", kConfig);
    dir.Write("weights/real.safetensors", WriteTensors({F32("a", 1)}));
    std::filesystem::create_symlink("weights/real.safetensors",
                                    dir.Path("model.safetensors"));
    auto checkpoint = Checkpoint::Open(dir.path());
    REQUIRE(checkpoint.ok());
    CHECK((*checkpoint)->names() == std::vector<std::string>{"a"});
  }
  SECTION("the Hugging Face hub cache layout is fine") {
    // models--org--name/snapshots/<rev>/<file> -> ../../blobs/<hash>
    TempDir cache;
    cache.Write("models--o--m/blobs/c0ffee", kConfig);
    cache.Write("models--o--m/blobs/beef", WriteTensors({F32("a", 1)}));
    const std::string snapshot = cache.Path("models--o--m/snapshots/rev1");
    std::filesystem::create_directories(snapshot);
    std::filesystem::create_symlink("../../blobs/c0ffee",
                                    snapshot + "/config.json");
    std::filesystem::create_symlink("../../blobs/beef",
                                    snapshot + "/model.safetensors");
    auto checkpoint = Checkpoint::Open(snapshot);
    REQUIRE(checkpoint.ok());
    CHECK((*checkpoint)->config_json() == kConfig);
    // The exception is for blobs/ only: elsewhere in the cache is refused.
    std::filesystem::remove(snapshot + "/model.safetensors");
    cache.Write("models--o--m/refs/stray", WriteTensors({F32("a", 1)}));
    std::filesystem::create_symlink("../../refs/stray",
                                    snapshot + "/model.safetensors");
    CheckRefused(snapshot, absl::StatusCode::kInvalidArgument,
                 {"outside the model directory"});
  }
}

TEST_CASE("checkpoint: fingerprint binds config and headers, not bytes",
          "[checkpoint]") {
  TempDir dir;
  WriteSharded(dir);
  auto first = Checkpoint::Open(dir.path());
  REQUIRE(first.ok());
  const std::string fingerprint = (*first)->Fingerprint();

  // The documented formula, recomputed here from the files' bytes.
  std::string material =
      absl::StrCat(U64Le(sizeof(kConfig) - 1), kConfig, U64Le(3));
  for (const auto& shard : (*first)->shards()) {
    absl::StrAppend(&material, U64Le(shard->header().size()),
                    std::string(shard->header()));
  }
  CHECK(fingerprint == util::Sha256Hex(material));

  SECTION("stable across opens") {
    auto again = Checkpoint::Open(dir.path());
    REQUIRE(again.ok());
    CHECK((*again)->Fingerprint() == fingerprint);
  }
  SECTION("unchanged when only tensor bytes change") {
    first->reset();  // unmap before rewriting
    dir.Write(kShard2,
              WriteTensors({F32("layer1.w", 3, 99), F32("norm", 1, 7)}));
    auto changed = Checkpoint::Open(dir.path());
    REQUIRE(changed.ok());
    CHECK(std::string_view(
              reinterpret_cast<const char*>((*changed)->Find("norm")->data),
              4) == F32Bytes(1, 7));
    CHECK((*changed)->Fingerprint() == fingerprint);
  }
  SECTION("changed by config.json") {
    dir.Write("config.json", std::string(kConfig) + " ");
    auto changed = Checkpoint::Open(dir.path());
    REQUIRE(changed.ok());
    CHECK((*changed)->Fingerprint() != fingerprint);
  }
  SECTION("changed by a shape in a header") {
    first->reset();
    dir.Write(
        kShard2,
        WriteTensors({TestTensor{"layer1.w", "F32", {3, 1}, F32Bytes(3, 20)},
                      F32("norm", 1)}));
    auto changed = Checkpoint::Open(dir.path());
    REQUIRE(changed.ok());
    CHECK((*changed)->Fingerprint() != fingerprint);
  }
  SECTION("changed by header metadata") {
    first->reset();
    dir.Write(kShard2, WriteTensors({F32("layer1.w", 3, 20), F32("norm", 1)},
                                    "{\"format\":\"pt\"}"));
    auto changed = Checkpoint::Open(dir.path());
    REQUIRE(changed.ok());
    CHECK((*changed)->Fingerprint() != fingerprint);
  }
}

}  // namespace
}  // namespace mesa_anyjev::model
