// The write policy: thresholds, profiles, outcome() and masked()
// (docs/annotate.md, The write policy).
#include "client/policy/policy.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/questions/question_set.h"

namespace mesa_anyjev::policy {
namespace {

using decision::QuestionKind;

// An AnyJev record over `probs` at `level`, as FromDecision would build it.
DecisionRecord Record(QuestionKind kind, std::vector<double> probs,
                      RecordLevel level = decision::Level::kL1,
                      Calibration calibration = Calibration::kAnyjev) {
  DecisionRecord r;
  r.question_id = "q";
  r.kind = kind;
  for (size_t i = 0; i < probs.size(); ++i) {
    r.options.push_back(kind == QuestionKind::kNoul ? (i == 0 ? "Yes" : "No")
                                                    : "o" + std::to_string(i));
  }
  r.provider = "anyjev";
  r.method = "anyjev";
  r.model = "fake";
  r.level = level;
  r.calibration = calibration;
  auto ranked = RankProbs(probs);
  REQUIRE(ranked.ok());
  r.answer_index = ranked->answer_index;
  r.answer = r.options[static_cast<size_t>(r.answer_index)];
  r.confidence = ranked->confidence;
  r.margin = ranked->margin;
  if (kind == QuestionKind::kNoul) r.p_true = probs[0];
  r.probs = std::move(probs);
  REQUIRE(r.Validate().ok());
  return r;
}

Thresholds WithAuto(Stat stat, double auto_at, double propose,
                    double margin = 0.0,
                    RecordLevel min_level = decision::Level::kL1) {
  Thresholds t;
  t.stat = stat;
  t.auto_threshold = auto_at;
  t.propose = propose;
  t.margin = margin;
  t.min_level = min_level;
  return t;
}

const Profile& Prod() {
  static const Profile p = *Policy::Defaults().profile("prod");
  return p;
}
const Profile& Dev() {
  static const Profile p = *Policy::Defaults().profile("dev");
  return p;
}

TEST_CASE("every question has thresholds with the right stat",
          "[questions][policy]") {
  const Policy& policy = Policy::Defaults();
  const auto& set = questions::QuestionSet::Reference();
  CHECK(policy.all_thresholds().size() == set.entries().size());
  for (const questions::QuestionEntry& e : set.entries()) {
    INFO(e.id());
    auto t = policy.thresholds(e.id());
    REQUIRE(t.ok());
    // A noul reads p_true (a confident No must not pass); a choice reads
    // confidence.
    CHECK(t->stat == (e.question.kind() == QuestionKind::kNoul
                          ? Stat::kPTrue
                          : Stat::kConfidence));
    CHECK_FALSE(t->auto_threshold.has_value());  // M5: proposed-only
    CHECK(t->cite.rfind("D6 bootstrap", 0) == 0);
  }
}

TEST_CASE("the M5 defaults are the policy_defaults table",
          "[questions][policy]") {
  const Policy& policy = Policy::Defaults();
  const auto t = [&](const char* id) { return *policy.thresholds(id); };
  CHECK(t("column.annotate").propose == 0.5);
  CHECK(t("column.annotate").min_level == decision::Level::kL0);
  CHECK(t("column.annotate").cite ==
        "D6 bootstrap: proposed-only until a LOCO bench row exists");
  CHECK(t("column.aspect").propose == 0.45);
  CHECK(t("column.aspect").margin == 0.10);
  CHECK(t("column.ontology").propose == 0.40);
  CHECK(t("column.ontology_fits").propose == 0.40);
  CHECK(t("term.fits").margin == 0.15);
  CHECK(t("term.fits").min_weight == 0.5);
  CHECK(t("term.fits.chooser").min_weight == 0.5);
  CHECK(t("avu.value_kind").min_level == decision::Level::kL0);
  CHECK(t("avu.keep").min_weight == 0.6);
  CHECK(t("dataset.ontology_applies").margin == 0.10);
  CHECK(t("datacite.resource_type_fits").margin == 0.15);
  CHECK(t("datacite.relation_type").propose == 0.40);
  CHECK(t("datacite.relation_type").margin == 0.10);
  CHECK(t("datacite.date_type_fits").propose == 0.50);
  CHECK(t("datacite.description_type").min_level == decision::Level::kL1);
  CHECK(t("term.fits").cite == "D6 bootstrap");

  CHECK(Prod().min_level_write == decision::Level::kL1);
  CHECK(Dev().min_level_write == decision::Level::kL0);
  CHECK(Prod().auto_calibrations ==
        std::set<Calibration>{Calibration::kAnyjev});
  CHECK_FALSE(Dev().allow_hosted_write);
}

TEST_CASE("lookups are strict and name what is missing",
          "[questions][policy]") {
  auto t = Policy::Defaults().thresholds("column.nothing");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(t.status().message()).find("column.nothing") !=
        std::string::npos);
  auto p = Policy::Defaults().profile("staging");
  REQUIRE_FALSE(p.ok());
  CHECK(std::string(p.status().message()) ==
        "no policy profile named staging (known: dev, prod)");
}

TEST_CASE("a noul reads p_true, so a confident No abstains",
          "[questions][policy]") {
  const Thresholds t = WithAuto(Stat::kPTrue, 0.9, 0.5);
  const DecisionRecord no = Record(QuestionKind::kNoul, {0.05, 0.95});
  CHECK(no.confidence == 0.95);
  CHECK(DecideOutcome(no, t, Prod()) == Outcome::kAbstain);
  CHECK(DecideOutcome(Record(QuestionKind::kNoul, {0.95, 0.05}), t, Prod()) ==
        Outcome::kAuto);
  CHECK(DecideOutcome(Record(QuestionKind::kNoul, {0.6, 0.4}), t, Prod()) ==
        Outcome::kProposed);
}

TEST_CASE("calibration none never reaches auto, even in dev",
          "[questions][policy]") {
  const Thresholds t =
      WithAuto(Stat::kConfidence, 0.5, 0.4, 0.0, policy::kNoLevel);
  DecisionRecord r = Record(QuestionKind::kChoice, {0.9, 0.1});
  r.calibration = Calibration::kNone;  // as a mislabelled source would
  Profile lax = Dev();
  lax.min_level_write = policy::kNoLevel;
  lax.auto_calibrations.insert(Calibration::kNone);
  CHECK(DecideOutcome(r, t, lax) == Outcome::kProposed);
}

TEST_CASE("typesafe can propose but never auto", "[questions][policy]") {
  const Thresholds t =
      WithAuto(Stat::kConfidence, 0.5, 0.4, 0.0, policy::kNoLevel);
  const DecisionRecord hosted =
      Record(QuestionKind::kChoice, {0.95, 0.05}, policy::kNoLevel,
             Calibration::kTypesafe);
  CHECK(DecideOutcome(hosted, t, Dev()) == Outcome::kProposed);
  CHECK(DecideOutcome(hosted, t, Prod()) == Outcome::kProposed);
  CHECK(DecideOutcome(Record(QuestionKind::kChoice, {0.3, 0.7},
                             policy::kNoLevel, Calibration::kTypesafe),
                      WithAuto(Stat::kConfidence, 0.99, 0.8),
                      Prod()) == Outcome::kAbstain);
}

TEST_CASE("level floors: the threshold's and the profile's",
          "[questions][policy]") {
  const DecisionRecord l0 =
      Record(QuestionKind::kChoice, {0.9, 0.1}, decision::Level::kL0);
  // Threshold floor L1 stops L0 even in dev.
  CHECK(DecideOutcome(l0, WithAuto(Stat::kConfidence, 0.8, 0.5), Dev()) ==
        Outcome::kProposed);
  // Threshold floor L0: dev lets L0 through, prod's L1 floor does not.
  const Thresholds t0 =
      WithAuto(Stat::kConfidence, 0.8, 0.5, 0.0, decision::Level::kL0);
  CHECK(DecideOutcome(l0, t0, Dev()) == Outcome::kAuto);
  CHECK(DecideOutcome(l0, t0, Prod()) == Outcome::kProposed);
  const DecisionRecord l2 =
      Record(QuestionKind::kChoice, {0.9, 0.1}, decision::Level::kL2);
  CHECK(DecideOutcome(
            l2,
            WithAuto(Stat::kConfidence, 0.8, 0.5, 0.0, decision::Level::kL2),
            Prod()) == Outcome::kAuto);
  const DecisionRecord raw =
      Record(QuestionKind::kChoice, {0.9, 0.1}, decision::Level::kRaw);
  CHECK(DecideOutcome(raw, t0, Dev()) == Outcome::kProposed);
}

TEST_CASE("a null auto means proposed-only", "[questions][policy]") {
  const DecisionRecord l2 =
      Record(QuestionKind::kNoul, {0.999, 0.001}, decision::Level::kL2);
  const Thresholds term = *Policy::Defaults().thresholds("term.fits");
  CHECK(DecideOutcome(l2, term, Dev()) == Outcome::kProposed);
  CHECK(DecideOutcome(
            Record(QuestionKind::kNoul, {0.49, 0.51}, decision::Level::kL2),
            term, Dev()) == Outcome::kAbstain);
  CHECK(DecideOutcome(Record(QuestionKind::kNoul, {0.5, 0.5}), term,
                      Prod()) == Outcome::kProposed);  // >= propose
}

TEST_CASE("missing labels, no answer or no probs abstain",
          "[questions][policy]") {
  const Thresholds t = WithAuto(Stat::kConfidence, 0.5, 0.1);
  const DecisionRecord r = Record(QuestionKind::kChoice, {0.9, 0.1});
  CHECK(DecideOutcome(r, t, Prod(), 0) == Outcome::kAuto);
  CHECK(DecideOutcome(r, t, Prod(), 1) == Outcome::kAbstain);
  DecisionRecord unanswered = r;
  unanswered.answer_index = -1;
  unanswered.answer = "";
  CHECK(DecideOutcome(unanswered, t, Prod()) == Outcome::kAbstain);
  auto rule = DecisionRecord::Rule(
      (*questions::QuestionSet::Reference().Find("column.annotate"))->question,
      nlohmann::ordered_json::object(), 0);
  REQUIRE(rule.ok());
  CHECK(DecideOutcome(*rule, t, Prod()) == Outcome::kAbstain);
  // A choice has no p_true: a p_true threshold has nothing to read.
  CHECK(DecideOutcome(r, WithAuto(Stat::kPTrue, 0.5, 0.1), Prod()) ==
        Outcome::kAbstain);
}

TEST_CASE("the margin floor gates auto only", "[questions][policy]") {
  const Thresholds t = WithAuto(Stat::kConfidence, 0.5, 0.4, 0.15);
  const DecisionRecord close = Record(QuestionKind::kChoice, {0.55, 0.45});
  CHECK(DecideOutcome(close, t, Prod()) == Outcome::kProposed);
  const DecisionRecord clear = Record(QuestionKind::kChoice, {0.6, 0.4});
  CHECK(DecideOutcome(clear, t, Prod()) == Outcome::kAuto);
  DecisionRecord no_margin = close;
  no_margin.margin.reset();  // a null margin passes
  CHECK(DecideOutcome(no_margin, t, Prod()) == Outcome::kAuto);
}

TEST_CASE("masking renormalises and logs masked_mass", "[questions][policy]") {
  const DecisionRecord r = Record(
      QuestionKind::kChoice,
      {0.05, 0.3, 0.1, 0.2, 0.15, 0.05, 0.05, 0.02, 0.03, 0.02, 0.02, 0.01});
  REQUIRE(r.answer_index == 1);
  std::vector<bool> mask(12, false);
  mask[0] = mask[2] = mask[8] = true;
  auto m = Masked(r, mask);
  REQUIRE(m.ok());
  // numpy: p * mask, round(1 - kept.sum(), 6), kept / kept.sum()
  CHECK(m->diagnostics["masked_mass"] == 0.82);
  CHECK(m->answer_index == 2);
  CHECK(m->answer == "o2");
  CHECK((*m->probs)[0] == 0.27777777777777773);
  CHECK((*m->probs)[2] == 0.5555555555555555);
  CHECK((*m->probs)[8] == 0.16666666666666663);
  CHECK((*m->probs)[1] == 0.0);
  CHECK(m->confidence == (*m->probs)[2]);
  CHECK(m->margin == Approx(0.5555555555555555 - 0.27777777777777773));
  CHECK_FALSE(m->diagnostics.contains("mask_empty"));
  CHECK(m->Validate().ok());
}

TEST_CASE("an empty mask answers nothing and says so", "[questions][policy]") {
  const DecisionRecord r = Record(QuestionKind::kChoice, {0.7, 0.3, 0.0});
  auto m = Masked(r, {false, false, true});
  REQUIRE(m.ok());
  CHECK(m->diagnostics["mask_empty"] == true);
  CHECK(m->diagnostics["masked_mass"] == 1.0);
  CHECK(m->answer_index == -1);
  CHECK(m->answer.empty());
  CHECK(DecideOutcome(*m, WithAuto(Stat::kConfidence, 0.1, 0.1), Dev()) ==
        Outcome::kAbstain);

  auto wrong = Masked(r, {true, false});
  REQUIRE_FALSE(wrong.ok());
  CHECK(std::string(wrong.status().message())
            .find("mask must have one entry per option") != std::string::npos);

  DecisionRecord no_probs = r;
  no_probs.probs.reset();
  no_probs.calibration = Calibration::kNone;
  auto unchanged = Masked(no_probs, {true});
  REQUIRE(unchanged.ok());
  CHECK(unchanged->diagnostics.empty());
}

TEST_CASE("masked_mass rounds as Python's round(x, 6)", "[questions][policy]") {
  // Python 3: round(x, 6) for each x.
  CHECK(PyRoundDigits(1 - 0.7, 6) == 0.3);
  CHECK(PyRoundDigits(0.6666665, 6) == 0.666667);
  CHECK(PyRoundDigits(5e-07, 6) == 0.0);
  CHECK(PyRoundDigits(1.5e-06, 6) == 2e-06);
  CHECK(PyRoundDigits(1.0000005, 6) == 1.000001);
  CHECK(std::signbit(PyRoundDigits(-1e-09, 6)));
}

TEST_CASE("outcome names are the reference's", "[questions][policy]") {
  for (const char* name : {"auto", "proposed", "human", "escalated", "abstain",
                           "rejected", "rule", "decider_unavailable"}) {
    auto o = ParseOutcome(name);
    REQUIRE(o.ok());
    CHECK(std::string(OutcomeName(*o)) == name);
  }
  CHECK_FALSE(ParseOutcome("written").ok());
  CHECK(std::string(StatName(Stat::kPTrue)) == "p_true");
}

}  // namespace
}  // namespace mesa_anyjev::policy
