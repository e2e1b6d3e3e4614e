// DecisionRecord: conversion from a Decision with the provider's downgrades,
// rule records, the invariants, rank_probs and meets_level.
#include "client/policy/decision_record.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/questions/question_set.h"

namespace mesa_anyjev::policy {
namespace {

using decision::Decision;
using decision::Level;
using decision::Question;
using Json = nlohmann::ordered_json;

const Question& Q(std::string_view id) {
  return (*questions::QuestionSet::Reference().Find(id))->question;
}

Decision MakeDecision(const Question& q, Level level,
                      std::vector<double> probs) {
  Decision d;
  d.question_id = q.id();
  d.question_key = q.key();
  d.kind = q.kind();
  d.options = q.options();
  d.level = level;
  d.probs = std::move(probs);
  d.diagnostics.answer_mass = 0.93;
  d.diagnostics.perms = {{0, 1}, {1, 0}};
  d.diagnostics.prompts = 2;
  d.diagnostics.prompt_sha256 = std::string(64, 'a');
  if (level == Level::kL0 || level == Level::kL1) {
    d.diagnostics.prior_method = "batch";
    d.diagnostics.prior_strength = 0.75;
    d.diagnostics.order_flip_raw = 0.0;
    d.diagnostics.order_flip_l0 = 0.5;
  }
  return d;
}

const Json kState = Json::parse(R"({"card": {"dataset": "d"}, "column": "c"})");
const RecordSource kFake{"fake", std::nullopt};

TEST_CASE("an L0 noul decision becomes an honest anyjev record",
          "[questions][policy]") {
  const Question& q = Q("term.fits");
  auto r = DecisionRecord::FromDecision(MakeDecision(q, Level::kL0, {0.3, 0.7}),
                                        q, kState, kFake);
  REQUIRE(r.ok());
  CHECK(r->question_id == "term.fits");
  CHECK(r->question_key == "0ccc8d141ffd30ff");
  CHECK(r->provider == "anyjev");
  CHECK(r->method == "anyjev");
  CHECK(r->model == "fake");
  CHECK(r->level == decision::Level::kL0);
  CHECK(r->calibration == Calibration::kAnyjev);
  CHECK(r->answer_index == 1);
  CHECK(r->answer == "No");
  CHECK(r->p_true == Approx(0.3));
  CHECK(r->confidence == Approx(0.7));
  CHECK(r->margin == Approx(0.4));
  CHECK_FALSE(r->score_value.has_value());
  CHECK(r->prompt_sha256 == std::string(64, 'a'));
  CHECK(r->state_sha256 == StateSha256(kState));
  CHECK(r->diagnostics.dump() ==
        R"({"answer_mass":0.93,"prior_method":"batch","prior_strength":0.75,)"
        R"("order_flip_raw":0.0,"order_flip_l0":0.5,"permutations":2})");
  const Json json = r->ToJson();
  std::vector<std::string> fields;
  for (const auto& [key, unused] : json.items()) fields.push_back(key);
  CHECK(fields == std::vector<std::string>{
                      "question_id",   "question_key", "kind",
                      "options",       "state",        "state_sha256",
                      "prompt_sha256", "provider",     "method",
                      "model",         "served_model", "level",
                      "calibration",   "probs",        "answer_index",
                      "answer",        "confidence",   "p_true",
                      "margin",        "score_value",  "diagnostics"});
  CHECK(json["level"] == "L0");
  CHECK(json["served_model"].is_null());
}

TEST_CASE("a raw decision records only answer_mass and permutations",
          "[questions][policy]") {
  const Question& q = Q("column.aspect");
  std::vector<double> probs(8, 0.1);
  probs[2] = 0.3;
  Decision d = MakeDecision(q, Level::kRaw, probs);
  d.diagnostics.prompt_sha256.clear();
  auto r = DecisionRecord::FromDecision(d, q, kState, kFake);
  REQUIRE(r.ok());
  CHECK(r->diagnostics.dump() == R"({"answer_mass":0.93,"permutations":2})");
  CHECK_FALSE(r->prompt_sha256.has_value());
  CHECK_FALSE(r->p_true.has_value());
  CHECK(r->answer == q.options()[2]);
}

TEST_CASE("a routed L2 decision is downgraded to L0 and marked",
          "[questions][policy]") {
  const Question& q = Q("term.fits.chooser");
  Decision d = MakeDecision(q, Level::kL2, {0.8, 0.2});
  d.diagnostics.answer_mass.reset();
  d.diagnostics.perms = {{0, 1}};
  d.diagnostics.readout = "head:lda";
  d.diagnostics.exit_layer = 20;
  d.diagnostics.blocks_executed = 20;
  d.diagnostics.temperature = 1.5;
  d.diagnostics.n_calib = 40;
  d.diagnostics.routed_from = "term.fits";
  auto r = DecisionRecord::FromDecision(d, q, kState, kFake);
  REQUIRE(r.ok());
  CHECK(r->level == decision::Level::kL0);
  CHECK(r->diagnostics.dump() ==
        R"({"permutations":1,"temperature":1.5,"n_calib":40,)"
        R"("routed_from":"term.fits","adapted":false,"adapt_n":0,)"
        R"("blocks_executed":20,"exit_layer":20,"readout":"head:lda",)"
        R"("routed_refused":true})");

  d.diagnostics.routed_from.clear();
  auto exact = DecisionRecord::FromDecision(d, q, kState, kFake);
  REQUIRE(exact.ok());
  CHECK(exact->level == decision::Level::kL2);
  CHECK(exact->diagnostics["routed_from"].is_null());
  CHECK_FALSE(exact->diagnostics.contains("routed_refused"));
}

TEST_CASE("L1 needs a frozen prior, else it is L0 with l1_prior_missing",
          "[questions][policy]") {
  const Question& q = Q("column.annotate");
  Decision d = MakeDecision(q, Level::kL1, {0.6, 0.4});
  d.diagnostics.temperature = 2.0;
  auto running = DecisionRecord::FromDecision(d, q, kState, kFake);
  REQUIRE(running.ok());
  CHECK(running->level == decision::Level::kL0);
  CHECK(running->diagnostics["l1_prior_missing"] == true);
  CHECK(running->diagnostics["temperature"] == 2.0);

  d.diagnostics.prior_method = "frozen:batch";
  auto frozen = DecisionRecord::FromDecision(d, q, kState, kFake);
  REQUIRE(frozen.ok());
  CHECK(frozen->level == decision::Level::kL1);
  CHECK_FALSE(frozen->diagnostics.contains("l1_prior_missing"));
}

TEST_CASE("FromDecision refuses another question's decision and auto",
          "[questions][policy]") {
  const Question& q = Q("term.fits");
  auto other = DecisionRecord::FromDecision(
      MakeDecision(Q("avu.keep"), Level::kL0, {0.5, 0.5}), q, kState, kFake);
  REQUIRE_FALSE(other.ok());
  CHECK(std::string(other.status().message()).find("926b627a33d6acb4") !=
        std::string::npos);
  auto automatic = DecisionRecord::FromDecision(
      MakeDecision(q, Level::kAuto, {0.5, 0.5}), q, kState, kFake);
  CHECK_FALSE(automatic.ok());
}

TEST_CASE("a score decision carries its value", "[questions][policy]") {
  auto q = Question::ScoreLevels("How much?", {"low", "mid", "high"}, "s");
  REQUIRE(q.ok());
  Decision d = MakeDecision(*q, Level::kRaw, {0.2, 0.3, 0.5});
  d.score_value = 1.3;
  auto r = DecisionRecord::FromDecision(d, *q, kState, kFake);
  REQUIRE(r.ok());
  CHECK(r->score_value == Approx(1.3));
}

TEST_CASE("rule records have no probabilities and level none",
          "[questions][policy]") {
  auto r = DecisionRecord::Rule(Q("column.annotate"), kState, 1);
  REQUIRE(r.ok());
  CHECK(r->provider == "rule");
  CHECK(r->method == "rule");
  CHECK(r->model == "n/a");
  CHECK(r->level == policy::kNoLevel);
  CHECK(r->calibration == Calibration::kNone);
  CHECK_FALSE(r->probs.has_value());
  CHECK(r->answer == "No");
  CHECK(r->Validate().ok());
  CHECK(r->ToJson()["probs"].is_null());
  auto out_of_range = DecisionRecord::Rule(Q("column.annotate"), kState, 2);
  REQUIRE_FALSE(out_of_range.ok());
  CHECK(std::string(out_of_range.status().message()).find("[0, 2)") !=
        std::string::npos);
}

TEST_CASE("Validate enforces the record invariants", "[questions][policy]") {
  const Question& q = Q("term.fits");
  auto base = DecisionRecord::FromDecision(
      MakeDecision(q, Level::kL0, {0.3, 0.7}), q, kState, kFake);
  REQUIRE(base.ok());
  REQUIRE(base->Validate().ok());
  const auto fails = [&](auto mutate, const std::string& expected) {
    DecisionRecord r = *base;
    mutate(r);
    const absl::Status status = r.Validate();
    INFO(expected);
    REQUIRE_FALSE(status.ok());
    CHECK(std::string(status.message()).find(expected) != std::string::npos);
  };
  fails([](DecisionRecord& r) { r.calibration = Calibration::kNone; },
        "probs must be null exactly when calibration is none");
  fails([](DecisionRecord& r) { r.level = decision::Level::kAuto; }, "auto");
  fails([](DecisionRecord& r) { r.level = policy::kNoLevel; },
        "calibration anyjev requires a level other than none");
  fails([](DecisionRecord& r) { r.calibration = Calibration::kTypesafe; },
        "calibration typesafe requires level none, got L0");
  fails([](DecisionRecord& r) { r.probs = std::vector<double>{1.0}; },
        "probs has 1 entries for 2 options");
  fails(
      [](DecisionRecord& r) {
        r.probs = std::vector<double>{-0.1, 1.1};
      },
      "probs[0] = -0.1 is below 0");
  fails(
      [](DecisionRecord& r) {
        r.probs = std::vector<double>{0.3, 0.6};
      },
      "more than 0.001 from 1");
  fails([](DecisionRecord& r) { r.p_true.reset(); },
        "a noul with probs must carry p_true");
  fails([](DecisionRecord& r) { r.answer_index = 2; },
        "answer_index must be -1 or below 2; got 2");
  fails([](DecisionRecord& r) { r.answer = "Yes"; },
        "answer \"Yes\" is not options[1] \"No\"");
  fails([](DecisionRecord& r) { r.method = "guess"; }, "method must be one of");
  fails([](DecisionRecord& r) { r.diagnostics["x"] = Json::array(); },
        "diagnostics.x is not a scalar");
  // Within the tolerance is fine.
  DecisionRecord close = *base;
  close.probs = std::vector<double>{0.3, 0.7009};
  CHECK(close.Validate().ok());
  // Hosted Jev: typesafe probabilities at level none are honest.
  DecisionRecord hosted = *base;
  hosted.calibration = Calibration::kTypesafe;
  hosted.level = policy::kNoLevel;
  hosted.method = "hosted:prompt_jev";
  CHECK(hosted.Validate().ok());
}

TEST_CASE("rank_probs: stable argmax, top and margin", "[questions][policy]") {
  auto tie = RankProbs({0.2, 0.4, 0.4});
  REQUIRE(tie.ok());
  CHECK(tie->answer_index == 1);
  CHECK(tie->confidence == 0.4);
  CHECK(tie->margin == 0.0);
  auto one = RankProbs({1.0});
  REQUIRE(one.ok());
  CHECK(one->answer_index == 0);
  CHECK(one->margin == 1.0);
  auto spread = RankProbs({0.1, 0.6, 0.3});
  REQUIRE(spread.ok());
  CHECK(spread->answer_index == 1);
  CHECK(spread->margin == Approx(0.3));
  CHECK_FALSE(RankProbs({}).ok());
}

TEST_CASE("meets_level ranks none < raw < L0 < L1 < L2",
          "[questions][policy]") {
  DecisionRecord r;
  r.level = decision::Level::kL1;
  CHECK(MeetsLevel(r, decision::Level::kL0));
  CHECK(MeetsLevel(r, decision::Level::kL1));
  CHECK_FALSE(MeetsLevel(r, decision::Level::kL2));
  r.level = policy::kNoLevel;
  CHECK_FALSE(MeetsLevel(r, decision::Level::kRaw));
  CHECK(MeetsLevel(r, policy::kNoLevel));
  CHECK(LevelRank(policy::kNoLevel) == -1);
  CHECK(LevelRank(decision::Level::kL2) == 3);
  CHECK(*ParseRecordLevel("L1") == decision::Level::kL1);
  CHECK_FALSE(ParseRecordLevel("auto").ok());
  CHECK(*ParseCalibration("typesafe") == Calibration::kTypesafe);
}

TEST_CASE("state_sha256 is Python's canonical JSON hash, order-free",
          "[questions][policy]") {
  const Json state = Json::parse(
      R"({"card": {"dataset": "DP1.10003.001.brd_countdata", "rows": 12,)"
      R"( "sites": [{"code": "HARV", "name": "Harvard Forest – Massachusetts"}]},)"
      R"( "column": {"name": "taxonID", "unit": "", "blank": true},)"
      R"( "aspect": "taxon"})");
  // hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":"),
  // ensure_ascii=False).encode()).hexdigest()
  CHECK(StateSha256(state) ==
        "e20b0d8a55aa1d7618f23dafa77e6a85ced3067c6d90db10e8cc0b0d10fb8a0b");
  Json reordered = Json::object();
  reordered["aspect"] = state["aspect"];
  reordered["column"] = state["column"];
  reordered["card"] = state["card"];
  CHECK(StateSha256(reordered) == StateSha256(state));
}

}  // namespace
}  // namespace mesa_anyjev::policy
