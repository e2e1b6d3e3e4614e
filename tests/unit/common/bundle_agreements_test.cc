// The bundle store across question locks (a question with no CURRENT under
// a new lock served by an earlier lock's of the same key) and agreement
// records (written beside a model's bundles, read back, judged current or
// stale; what an adopted version needs to be put).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/bundles/agreement_record.h"
#include "common/bundles/bundle_store.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::bundles {
namespace {

namespace fs = std::filesystem;

constexpr char kOld[] = "0190586d0123456789abcdef";
constexpr char kNew[] = "9f9370e0fedcba9876543210";
const ModelBinding kFake{"fake", "aaaa1111"};

Json File(const std::map<std::string, double>& temperatures) {
  Json file{{"model", "fake"},
            {"artifacts", Json::object()},
            {"heads", Json::object()}};
  for (const auto& [key, t] : temperatures) {
    file["artifacts"][key] = {{"method", "temperature"}, {"temperature", t}};
  }
  return file;
}

Json Extra(const std::map<std::string, std::string>& per_question) {
  Json extra;
  for (const auto& [question, key] : per_question) {
    extra["per_question"][question] = {{"key", key}, {"level", "L1"}};
    extra["validation"][question]["loco"] = {{"acc", 0.8}, {"ece", 0.1}};
  }
  return extra;
}

std::unique_ptr<BundleStore> Open(const testing::TempDir& tmp,
                                  const std::string& lock,
                                  ModelBinding model = kFake) {
  auto store = BundleStore::Open(tmp.path(), model, lock);
  REQUIRE(store.ok());
  return *std::move(store);
}

TEST_CASE("bundles: a new lock inherits the CURRENT of every unchanged key",
          "[bundles][locks]") {
  testing::TempDir tmp;
  auto old_lock = Open(tmp, kOld);
  REQUIRE(old_lock
              ->Put(File({{"ka", 1.5}, {"kb", 2.5}}),
                    Extra({{"qa", "ka"}, {"qb", "kb"}}))
              .ok());
  REQUIRE(old_lock->Promote(1, "qa", false).ok());
  REQUIRE(old_lock->Promote(1, "qb", false).ok());

  // The new lock adds qc, keeps qa's key and rewords qb (a new key).
  const std::map<std::string, std::string> live = {
      {"qa", "ka"}, {"qb", "kb-reworded"}, {"qc", "kc"}};
  auto new_lock = Open(tmp, kNew);
  auto served = new_lock->Served(&live);
  REQUIRE(served.ok());
  CHECK(served->versions == std::map<std::string, int>{{"qa", 1}});
  CHECK(served->inherited ==
        std::map<std::string, std::string>{{"qa", "0190586d"}});
  CHECK(served->file["artifacts"].size() == 1);
  CHECK(served->file["artifacts"]["ka"]["temperature"] == 1.5);

  // Without live keys and nothing recorded, nothing is inherited.
  CHECK(new_lock->Served()->versions.empty());
  // Recorded once, the lock's keys serve where none are passed (the daemon
  // at start).
  Json questions = {{"qa", {{"key", "ka"}}},
                    {"qb", {{"key", "kb-reworded"}}},
                    {"qc", {{"key", "kc"}}}};
  REQUIRE(new_lock->KeepLockQuestions(questions).ok());
  CHECK(new_lock->LockKeys() == live);
  CHECK(new_lock->Served()->inherited.contains("qa"));

  // Promote under the new lock acts on it alone: qc's own version is
  // served beside the inherited qa, and the old lock's pointers are as
  // they were.
  REQUIRE(new_lock->Put(File({{"kc", 0.9}}), Extra({{"qc", "kc"}})).ok());
  REQUIRE(new_lock->Promote(1, "qc", false).ok());
  served = new_lock->Served(&live);
  CHECK(served->versions == std::map<std::string, int>{{"qa", 1}, {"qc", 1}});
  CHECK(served->inherited.size() == 1);
  CHECK(*old_lock->CurrentAll() ==
        std::map<std::string, int>{{"qa", 1}, {"qb", 1}});
  // Rollback of an inherited question is refused under the new lock.
  auto rolled = new_lock->Rollback("qa");
  CHECK(absl::IsFailedPrecondition(rolled.status()));
  CHECK(std::string(rolled.status().message()).find("under lock 9f9370e0") !=
        std::string::npos);

  // A version of the new lock for qa replaces the inherited one.
  REQUIRE(new_lock->Put(File({{"ka", 3.0}}), Extra({{"qa", "ka"}})).ok());
  REQUIRE(new_lock->Promote(2, "qa", false).ok());
  served = new_lock->Served(&live);
  CHECK(served->inherited.empty());
  CHECK(served->file["artifacts"]["ka"]["temperature"] == 3.0);
}

TEST_CASE("bundles: of two earlier locks, the pointer that moved last wins",
          "[bundles][locks]") {
  testing::TempDir tmp;
  const std::map<std::string, std::string> live = {{"qa", "ka"}};
  auto first = Open(tmp, kOld);
  REQUIRE(first->Put(File({{"ka", 1.0}}), Extra({{"qa", "ka"}})).ok());
  REQUIRE(first->Promote(1, "qa", false).ok());
  auto second = Open(tmp, "11111111aaaa");
  REQUIRE(second->Put(File({{"ka", 2.0}}), Extra({{"qa", "ka"}})).ok());
  REQUIRE(second->Promote(1, "qa", false).ok());
  // Make the first lock's pointer the newer one.
  const fs::path pointer = fs::path(first->dir()) / "current" / "qa";
  fs::last_write_time(
      pointer, fs::last_write_time(fs::path(second->dir()) / "current" / "qa") +
                   std::chrono::seconds(5));
  auto third = Open(tmp, kNew);
  auto inherited = third->Inherited(live);
  REQUIRE(inherited.contains("qa"));
  CHECK(inherited.at("qa").lock == "0190586d");
  CHECK(inherited.at("qa").artifacts["artifacts"]["ka"]["temperature"] == 1.0);

  // A version that no longer verifies is passed over for the next one.
  {
    std::ofstream out(first->dir() + "/v1/artifacts.json", std::ios::app);
    out << "\n";
  }
  inherited = third->Inherited(live);
  REQUIRE(inherited.contains("qa"));
  CHECK(inherited.at("qa").lock == "11111111");
}

TEST_CASE("bundles: another identity's CURRENT is never inherited",
          "[bundles][locks]") {
  testing::TempDir tmp;
  auto writer = Open(tmp, kOld, {"fake", "0ther1dentity"});
  REQUIRE(writer->Put(File({{"ka", 1.0}}), Extra({{"qa", "ka"}})).ok());
  REQUIRE(writer->Promote(1, "qa", false).ok());
  CHECK(Open(tmp, kNew)->Inherited({{"qa", "ka"}}).empty());
}

Json Record(const std::string& verdict, const std::string& lock = kOld) {
  return Json{
      {"record", kAgreementRecord},
      {"date", "2026-12-06T10:00:00Z"},
      {"questions_lock_sha", lock},
      {"labels_sha256", "ffff"},
      {"models",
       {{{"model", "fake"},
         {"model_identity", "aaaa1111"},
         {"backend_kind", "fake"},
         {"hidden", {{"n_layers", 4}, {"hidden_size", 64}}}},
        {{"model", "fake-t1.4"},
         {"model_identity", "bbbb2222"},
         {"backend_kind", "hf"},
         {"hidden", nullptr}}}},
      {"questions",
       {{"qa",
         {{"key", "ka"}, {"labels_sha256", "1234"}, {"verdict", verdict}}},
        {"qb",
         {{"key", "kb"},
          {"labels_sha256", "5678"},
          {"verdict", "disagree"}}}}}};
}

TEST_CASE("agreements: written beside the bundles, read back, judged",
          "[bundles][agreements]") {
  testing::TempDir tmp;
  auto store = Open(tmp, kOld);
  auto path = WriteAgreement(store->dir(), kFake, Record("agree"));
  REQUIRE(path.ok());
  CHECK(*path == store->dir() + "/agreements/fake-t1.4.bbbb2222.json");
  // A record of two other models is not kept here.
  CHECK(absl::IsFailedPrecondition(
      WriteAgreement(store->dir(), {"Qwen/Qwen3-8B", "cc"}, Record("agree"))
          .status()));

  const auto listed = ListAgreements(store->dir());
  REQUIRE(listed.size() == 1);
  REQUIRE(listed[0].record.ok());
  const Json& record = *listed[0].record;
  const ModelBinding other{"fake-t1.4", "bbbb2222"};
  const std::string labels = "1234";
  Standing s = StandingOf(record, kFake, &other, kOld, "qa", "ka", &labels);
  CHECK(s.verdict == "agree");
  CHECK(s.unlocks());
  CHECK(s.other.model == "fake-t1.4");
  CHECK(StandingOf(record, kFake, &other, kOld, "qb", "kb", nullptr).verdict ==
        "disagree");
  CHECK(StandingOf(record, kFake, &other, kOld, "qz", "kz", nullptr).verdict ==
        "n/a");

  // Stale: new labels, a reworded key, another lock, another identity on
  // either side.
  const std::string relabelled = "9999";
  s = StandingOf(record, kFake, &other, kOld, "qa", "ka", &relabelled);
  CHECK(s.verdict == "stale");
  CHECK(s.why.find("labels changed") != std::string::npos);
  CHECK_FALSE(s.unlocks());
  CHECK(StandingOf(record, kFake, &other, kOld, "qa", "ka2", &labels).verdict ==
        "stale");
  CHECK(StandingOf(record, kFake, &other, kNew, "qa", "ka", &labels).verdict ==
        "stale");
  const ModelBinding reloaded{"fake-t1.4", "cccc3333"};
  CHECK(
      StandingOf(record, kFake, &reloaded, kOld, "qa", "ka", &labels).verdict ==
      "stale");
  CHECK(StandingOf(record, {"fake", "dddd"}, &other, kOld, "qa", "ka", &labels)
            .verdict == "stale");

  AgreementLookup found = FindAgreement(ListAgreements(store->dir()), kFake,
                                        other, kOld, "qa", "ka", &labels);
  CHECK(found.record.has_value());
  found = FindAgreement(ListAgreements(store->dir()), kFake, other, kOld, "qb",
                        "kb", nullptr);
  CHECK_FALSE(found.record.has_value());
  CHECK(found.why_not.find("says disagree for qb") != std::string::npos);
  found = FindAgreement(ListAgreements(store->dir()), kFake,
                        {"Qwen/Qwen3-8B", ""}, kOld, "qa", "ka", nullptr);
  CHECK(found.why_not ==
        "no agreement record between 'fake' and 'Qwen/Qwen3-8B'");

  // A file that is not a record is listed with why.
  {
    std::ofstream out(store->dir() + "/agreements/broken.json");
    out << "{\"record\": \"something else\"}";
  }
  const auto again = ListAgreements(store->dir());
  REQUIRE(again.size() == 2);
  CHECK_FALSE(again[0].record.ok());
  CHECK(std::string(again[0].record.status().message()).find("record:") !=
        std::string::npos);
}

TEST_CASE("agreements: malformed records are refused naming the field",
          "[bundles][agreements]") {
  Json record = Record("agree");
  record["models"].erase(1);
  CHECK(CheckAgreementRecord(record).message() ==
        "agreement record: models: needs exactly two (a, b)");
  record = Record("maybe");
  CHECK(std::string(CheckAgreementRecord(record).message())
            .find("questions.qa.verdict: 'maybe'") != std::string::npos);
  record = Record("agree");
  record["models"][0].erase("model_identity");
  CHECK(std::string(CheckAgreementRecord(record).message())
            .find("models[0].model_identity: required") != std::string::npos);
}

TEST_CASE(
    "bundles: a version adopted from another model needs a record that "
    "agrees on every question it holds",
    "[bundles][agreements]") {
  testing::TempDir tmp;
  auto store = Open(tmp, kOld);
  Json extra = Extra({{"qa", "ka"}});
  extra["adopted_from"] = {{"model", "fake-t1.4"},
                           {"model_identity", "bbbb2222"}};
  auto refused = store->Put(File({{"ka", 1.5}}), extra);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(std::string(refused.status().message())
            .find("no agreement record between 'fake' and 'fake-t1.4'") !=
        std::string::npos);

  REQUIRE(WriteAgreement(store->dir(), kFake, Record("agree")).ok());
  CHECK(store->Put(File({{"ka", 1.5}}), extra).ok());
  // qb: the record says the two disagree on it.
  Json both = Extra({{"qa", "ka"}, {"qb", "kb"}});
  both["adopted_from"] = extra["adopted_from"];
  refused = store->Put(File({{"ka", 1.5}, {"kb", 1.0}}), both);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(std::string(refused.status().message()).find("says disagree for qb") !=
        std::string::npos);
  // A record of another lock unlocks nothing here.
  testing::TempDir other;
  auto later = Open(other, kNew);
  REQUIRE(WriteAgreement(later->dir(), kFake, Record("agree", kOld)).ok());
  CHECK(absl::IsFailedPrecondition(
      later->Put(File({{"ka", 1.5}}), extra).status()));
}

}  // namespace
}  // namespace mesa_anyjev::bundles
