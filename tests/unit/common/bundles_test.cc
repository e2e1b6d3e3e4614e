// The bundle store: layout, Put/Get with checksums, refusals, the promote
// gate, per-question CURRENT pointers with rollback, what is served, the
// model binding (a lock change keeps versions whose keys all live) and dead
// writers' temporaries.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/bundles/bundle_store.h"
#include "common/util/files.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::bundles {
namespace {

namespace fs = std::filesystem;

constexpr char kLock[] = "0190586d0123456789abcdef";
const ModelBinding kFake{"fake", "aaaa1111"};

// A heads/export file with an L1 artifact under `key` and maybe a head.
Json ArtifactsFile(const std::string& key, double temperature,
                   bool head = false) {
  Json file;
  file["model"] = "fake";
  file["artifacts"][key] = {{"method", "temperature"},
                            {"temperature", temperature}};
  file["heads"] = Json::object();
  if (head) file["heads"][key] = {{"method", "head:lda"}, {"layer_abs", 2}};
  return file;
}

Json Extra(const std::string& question, const std::string& key,
           std::optional<std::pair<double, double>> loco) {
  Json extra;
  extra["per_question"][question] = {{"key", key}, {"level", "L1"}};
  if (loco.has_value()) {
    extra["validation"][question]["loco"] = {{"acc", loco->first},
                                             {"ece", loco->second}};
  }
  extra["fitted_on"] = {{"backend_kind", "fake"}};
  return extra;
}

std::unique_ptr<BundleStore> OpenStore(const testing::TempDir& tmp,
                                       ModelBinding model = kFake,
                                       StoreOptions options = {}) {
  auto store = BundleStore::Open(tmp.path(), model, kLock, options);
  REQUIRE(store.ok());
  return *std::move(store);
}

TEST_CASE(
    "bundles: Put writes numbered immutable versions with a full manifest",
    "[bundles]") {
  testing::TempDir tmp;
  auto store = OpenStore(tmp);
  CHECK(store->dir() == tmp.Path("fake/0190586d"));
  Json observations = {{"k1", {{"labels", {0, 1}}}}};
  auto v1 = store->Put(ArtifactsFile("k1", 1.5),
                       Extra("term.fits", "k1", {{0.8, 0.1}}), &observations);
  REQUIRE(v1.ok());
  CHECK(*v1 == 1);
  auto v2 = store->Put(ArtifactsFile("k1", 2.0), Extra("term.fits", "k1", {}));
  REQUIRE(v2.ok());
  CHECK(*v2 == 2);
  CHECK(*store->Versions() == std::vector<int>{1, 2});
  CHECK(fs::exists(tmp.Path("fake/0190586d/v1/observations.json")));
  CHECK_FALSE(fs::exists(tmp.Path("fake/0190586d/v2/observations.json")));

  auto got = store->Get(1);
  REQUIRE(got.ok());
  const Json& m = got->manifest;
  CHECK(m["model"] == "fake");
  CHECK(m["model_identity"] == "aaaa1111");
  CHECK(m["questions_lock_sha"] == kLock);
  CHECK(m["version"] == 1);
  CHECK(m["per_question"]["term.fits"]["key"] == "k1");
  CHECK(m["validation"]["term.fits"]["loco"]["acc"] == 0.8);
  CHECK(m["fitted_on"]["backend_kind"] == "fake");
  CHECK(m["created"].get<std::string>().size() == 20);  // ...T..:..:..Z
  CHECK(m["files"].size() == 2);
  CHECK(got->artifacts["artifacts"]["k1"]["temperature"] == 1.5);
  // No current version until one is promoted.
  CHECK_FALSE(store->Current("term.fits")->has_value());
}

TEST_CASE(
    "bundles: Put refuses malformed input, other models and oversize files",
    "[bundles]") {
  testing::TempDir tmp;
  StoreOptions small;
  small.max_file_bytes = 4096;
  auto store = OpenStore(tmp, kFake, small);
  const Json ok = ArtifactsFile("k1", 1.5);

  auto expect = [&](absl::StatusOr<int> result, absl::StatusCode code,
                    const std::string& needle) {
    INFO(result.status().ToString());
    CHECK(result.status().code() == code);
    CHECK(std::string(result.status().message()).find(needle) !=
          std::string::npos);
  };
  expect(store->Put(ok, Json::object()), absl::StatusCode::kInvalidArgument,
         "manifest.per_question");
  expect(store->Put(ok, Extra("term.fits", "nokey", {})),
         absl::StatusCode::kInvalidArgument, "manifest.per_question.term.fits");
  expect(store->Put(ok, Extra("../evil", "k1", {})),
         absl::StatusCode::kInvalidArgument, "question_id");
  Json foreign = ok;
  foreign["model"] = "Qwen/Qwen3-8B";
  expect(store->Put(foreign, Extra("term.fits", "k1", {})),
         absl::StatusCode::kFailedPrecondition, "Qwen/Qwen3-8B");
  Json other_identity = Extra("term.fits", "k1", {});
  other_identity["model_identity"] = "bbbb2222";
  expect(store->Put(ok, other_identity), absl::StatusCode::kFailedPrecondition,
         "bbbb2222");
  Json other_lock = Extra("term.fits", "k1", {});
  other_lock["questions_lock_sha"] = "ffffffff";
  expect(store->Put(ok, other_lock), absl::StatusCode::kFailedPrecondition,
         "ffffffff");
  Json sets_version = Extra("term.fits", "k1", {});
  sets_version["version"] = 7;
  expect(store->Put(ok, sets_version), absl::StatusCode::kInvalidArgument,
         "manifest.version");
  Json bad_loco = Extra("term.fits", "k1", {});
  bad_loco["validation"]["term.fits"]["loco"] = {{"acc", "high"}};
  expect(store->Put(ok, bad_loco), absl::StatusCode::kInvalidArgument,
         "validation.term.fits.loco");
  Json big = ok;
  big["padding"] = std::string(5000, 'x');
  expect(store->Put(big, Extra("term.fits", "k1", {})),
         absl::StatusCode::kInvalidArgument, "limit of 4096 bytes");
  // Nothing half-written was left behind by any refusal.
  CHECK(store->Versions()->empty());
  CHECK(fs::directory_iterator(store->dir()) != fs::directory_iterator());
  for (const auto& entry : fs::directory_iterator(store->dir())) {
    const std::string name = entry.path().filename().string();
    CHECK((name == "current" || name == ".lock"));
  }
}

TEST_CASE("bundles: Get verifies every file's sha256", "[bundles]") {
  testing::TempDir tmp;
  auto store = OpenStore(tmp);
  REQUIRE(store->Put(ArtifactsFile("k1", 1.5), Extra("q", "k1", {})).ok());
  CHECK(absl::IsNotFound(store->Get(2).status()));
  CHECK(absl::IsNotFound(store->Get(0).status()));
  const std::string artifacts = tmp.Path("fake/0190586d/v1/artifacts.json");
  {
    std::ofstream out(artifacts, std::ios::app);
    out << " ";
  }
  auto tampered = store->Get(1);
  CHECK(absl::IsDataLoss(tampered.status()));
  CHECK(std::string(tampered.status().message()).find("v1/artifacts.json") !=
        std::string::npos);
  fs::remove(artifacts);
  auto missing = store->Get(1);
  CHECK(absl::IsDataLoss(missing.status()));
  CHECK(std::string(missing.status().message()).find("missing") !=
        std::string::npos);
}

TEST_CASE("bundles: Promote applies the gate; rollback walks the history",
          "[bundles]") {
  testing::TempDir tmp;
  auto store = OpenStore(tmp);
  const std::string q = "term.fits";
  for (const auto& loco : std::vector<std::optional<std::pair<double, double>>>{
           {{0.80, 0.10}}, {{0.70, 0.10}}, std::nullopt, {{0.85, 0.05}}}) {
    REQUIRE(store->Put(ArtifactsFile("k1", 1.5), Extra(q, "k1", loco)).ok());
  }
  CHECK(absl::IsNotFound(store->Promote(9, q, false).status()));
  auto first = store->Promote(1, q, false);
  REQUIRE(first.ok());
  CHECK(first->version == 1);
  CHECK_FALSE(first->previous.has_value());
  CHECK(*util::ReadFile(store->dir() + "/current/term.fits") == "v1\n");

  auto regress = store->Promote(2, q, false);
  CHECK(absl::IsFailedPrecondition(regress.status()));
  CHECK(regress.status().message() ==
        "v2 regresses against v1: acc 0.700 vs 0.800, ece 0.100 vs 0.100");
  // A version without LOCO figures cannot slip past the gate (the
  // reference's could).
  auto no_loco = store->Promote(3, q, false);
  CHECK(absl::IsFailedPrecondition(no_loco.status()));
  CHECK(std::string(no_loco.status().message()).find("no LOCO") !=
        std::string::npos);
  CHECK(**store->Current(q) == 1);

  auto forced = store->Promote(2, q, /*force=*/true);
  REQUIRE(forced.ok());
  CHECK(*forced->previous == 1);
  auto better = store->Promote(4, q, false);  // better than v2
  REQUIRE(better.ok());
  CHECK(*util::ReadFile(store->dir() + "/current/term.fits") == "v4\nv2\nv1\n");
  // A question the version has nothing for.
  CHECK(
      absl::IsFailedPrecondition(store->Promote(4, "other.q", true).status()));

  auto back = store->Rollback(q);
  REQUIRE(back.ok());
  CHECK(back->version == 2);
  CHECK(*back->previous == 4);
  REQUIRE(store->Rollback(q).ok());
  CHECK(**store->Current(q) == 1);
  CHECK(absl::IsFailedPrecondition(store->Rollback(q).status()));
  CHECK(absl::IsFailedPrecondition(store->Rollback("never.promoted").status()));
}

TEST_CASE(
    "bundles: Served merges each question's current version, nothing else",
    "[bundles]") {
  testing::TempDir tmp;
  auto store = OpenStore(tmp);
  Json both = ArtifactsFile("ka", 1.0, /*head=*/true);
  both["artifacts"]["kb"] = {{"method", "temperature"}, {"temperature", 3.0}};
  both["artifacts"]["kc"] = {{"method", "temperature"}, {"temperature", 4.0}};
  Json extra = Extra("qa", "ka", {{0.9, 0.1}});
  extra["per_question"]["qb"] = {{"key", "kb"}};
  extra["validation"]["qb"]["loco"] = {{"acc", 0.9}, {"ece", 0.1}};
  REQUIRE(store->Put(both, extra).ok());  // v1
  REQUIRE(
      store->Put(ArtifactsFile("kb", 2.0), Extra("qb", "kb", {{0.95, 0.05}}))
          .ok());  // v2
  REQUIRE(store->Promote(1, "qa", false).ok());
  REQUIRE(store->Promote(2, "qb", false).ok());
  auto served = store->Served();
  REQUIRE(served.ok());
  CHECK(served->versions == std::map<std::string, int>{{"qa", 1}, {"qb", 2}});
  CHECK(served->keys.at("qa") == "ka");
  const Json& file = served->file;
  CHECK(file["model"] == "fake");
  CHECK(file["artifacts"].size() == 2);  // kc is in v1 but served by no one
  CHECK(file["artifacts"]["kb"]["temperature"] == 2.0);
  CHECK(file["heads"].size() == 1);
  CHECK(file["heads"].contains("ka"));
  CHECK(served->refused.empty());

  // A version that no longer verifies is refused, the others still served.
  {
    std::ofstream out(store->dir() + "/v2/artifacts.json", std::ios::app);
    out << "\n";
  }
  served = store->Served();
  REQUIRE(served.ok());
  CHECK(served->versions.size() == 1);
  REQUIRE(served->refused.size() == 1);
  CHECK(served->refused[0].rfind("qb: v2/artifacts.json", 0) == 0);
}

TEST_CASE(
    "bundles: Binding: another identity is refused naming both; stale keys",
    "[bundles]") {
  testing::TempDir tmp;
  {
    auto writer = OpenStore(tmp, {"fake", "0ther1dentity"});
    REQUIRE(
        writer->Put(ArtifactsFile("k1", 1.5), Extra("q", "k1", {{0.9, 0.1}}))
            .ok());
  }
  auto store = OpenStore(tmp);
  auto promoted = store->Promote(1, "q", false);
  CHECK(absl::IsFailedPrecondition(promoted.status()));
  const std::string message(promoted.status().message());
  CHECK(message.find("0ther1dentity") != std::string::npos);
  CHECK(message.find("aaaa1111") != std::string::npos);

  Json manifest = {{"model", "fake"},
                   {"questions_lock_sha", "11112222"},
                   {"per_question",
                    {{"q1", {{"key", "aaaabbbbccccdddd"}}},
                     {"q2", {{"key", "1111222233334444"}}}}}};
  const std::map<std::string, std::string> live = {{"q1", "aaaabbbbccccdddd"},
                                                   {"q2", "5555666677778888"}};
  auto stale = CheckBinding(manifest, kFake, kLock, &live);
  CHECK(absl::IsFailedPrecondition(stale));
  CHECK(std::string(stale.message()).find("q2:111122223333") !=
        std::string::npos);
  const std::map<std::string, std::string> all_live = {
      {"q1", "aaaabbbbccccdddd"}, {"q2", "1111222233334444"}};
  CHECK(CheckBinding(manifest, kFake, kLock, &all_live).ok());   // all live
  CHECK(CheckBinding(manifest, kFake, "11112222", &live).ok());  // same lock
  manifest["model"] = "Qwen/Qwen3-8B";
  CHECK(
      absl::IsFailedPrecondition(CheckBinding(manifest, kFake, kLock, &live)));
}

TEST_CASE("bundles: Open removes dead writers' temporaries and keeps live ones",
          "[bundles]") {
  testing::TempDir tmp;
  const std::string dir = tmp.Path("Qwen__Qwen3-8B/0190586d");
  // pid 2^22 + 1 is above pid_max's default ceiling, so no process has it.
  tmp.Write("Qwen__Qwen3-8B/0190586d/.v3.tmp-4194305-00ff/artifacts.json", "{");
  tmp.Write("Qwen__Qwen3-8B/0190586d/current/.q.tmp-4194305-00aa", "v9\n");
  const std::string live = absl::StrCat("Qwen__Qwen3-8B/0190586d/.v4.tmp-",
                                        getpid(), "-0001/manifest.json");
  tmp.Write(live, "{");
  auto store = BundleStore::Open(tmp.path(), {"Qwen/Qwen3-8B", ""}, kLock, {});
  REQUIRE(store.ok());
  CHECK_FALSE(fs::exists(dir + "/.v3.tmp-4194305-00ff"));
  CHECK_FALSE(fs::exists(dir + "/current/.q.tmp-4194305-00aa"));
  CHECK(fs::exists(tmp.Path(live)));
  CHECK((*store)->Versions()->empty());
  CHECK((*store)->CurrentAll()->empty());
  CHECK(absl::IsInvalidArgument(
      BundleStore::Open(tmp.path(), kFake, "XYZ", {}).status()));
}

TEST_CASE("bundles: ParseJsonLimited refuses deep nesting before parsing",
          "[bundles]") {
  CHECK(ParseJsonLimited("{\"a\": [1, {\"b\": \"[[[[\"}]}", "x").ok());
  const std::string deep(100000, '[');
  auto refused = ParseJsonLimited(deep, "artifacts_json");
  CHECK(absl::IsInvalidArgument(refused.status()));
  CHECK(std::string(refused.status().message()).find("artifacts_json") == 0);
  CHECK(absl::IsInvalidArgument(ParseJsonLimited("{nope", "x").status()));
  CHECK(ModelSlug("RedHatAI/Qwen3-8B-NVFP4") == "RedHatAI__Qwen3-8B-NVFP4");
}

}  // namespace
}  // namespace mesa_anyjev::bundles
