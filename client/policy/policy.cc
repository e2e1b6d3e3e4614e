// The write policy (see policy.h).
#include "client/policy/policy.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/decision/numpy_ops.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::policy {
namespace {

constexpr char kBootstrap[] = "D6 bootstrap";

Thresholds Make(Stat stat, double propose, double margin, RecordLevel min_level,
                double min_weight = 0.6, std::string cite = kBootstrap) {
  Thresholds t;
  t.stat = stat;
  t.auto_threshold = std::nullopt;  // M5: proposed-only everywhere
  t.propose = propose;
  t.margin = margin;
  t.min_level = min_level;
  t.min_weight = min_weight;
  t.cite = std::move(cite);
  return t;
}

std::map<std::string, Thresholds> DefaultThresholds() {
  using L = decision::Level;
  const Stat p = Stat::kPTrue, c = Stat::kConfidence;
  std::map<std::string, Thresholds> t;
  t["column.annotate"] =
      Make(p, 0.5, 0.0, L::kL0, 0.6,
           "D6 bootstrap: proposed-only until a LOCO bench row exists");
  t["column.aspect"] = Make(c, 0.45, 0.10, L::kL1);
  t["column.ontology"] = Make(c, 0.40, 0.0, L::kL1);
  t["column.ontology_fits"] = Make(p, 0.40, 0.0, L::kL1);
  // Consensus negatives carry weight 0.5 and must enter the fit.
  t["term.fits"] = Make(p, 0.50, 0.15, L::kL1, 0.5);
  t["term.fits.chooser"] = Make(p, 0.50, 0.15, L::kL1, 0.5);
  t["avu.value_kind"] = Make(c, 0.50, 0.0, L::kL0);
  t["avu.keep"] = Make(p, 0.50, 0.0, L::kL1);
  // Recorded, never writes.
  t["dataset.ontology_applies"] = Make(p, 0.50, 0.10, L::kL1);
  t["datacite.resource_type_fits"] = Make(p, 0.50, 0.15, L::kL1);
  for (const char* choice :
       {"datacite.contributor_type", "datacite.relation_type",
        "datacite.date_type", "datacite.description_type"}) {
    t[choice] = Make(c, 0.40, 0.10, L::kL1);
  }
  for (const char* noul :
       {"datacite.contributor_type_fits", "datacite.relation_type_fits",
        "datacite.date_type_fits"}) {
    t[noul] = Make(p, 0.50, 0.15, L::kL1);
  }
  return t;
}

std::map<std::string, Profile> DefaultProfiles() {
  std::map<std::string, Profile> profiles;
  profiles["prod"] = Profile{"prod",
                             decision::Level::kL1,
                             {Calibration::kAnyjev},
                             /*allow_hosted_write=*/false};
  profiles["dev"] = Profile{"dev",
                            decision::Level::kL0,
                            {Calibration::kAnyjev},
                            /*allow_hosted_write=*/false};
  return profiles;
}

constexpr util::EnumName<Outcome> kOutcomeNames[] = {
    {Outcome::kAuto, "auto"},
    {Outcome::kProposed, "proposed"},
    {Outcome::kHuman, "human"},
    {Outcome::kEscalated, "escalated"},
    {Outcome::kAbstain, "abstain"},
    {Outcome::kRejected, "rejected"},
    {Outcome::kRule, "rule"},
    {Outcome::kDeciderUnavailable, "decider_unavailable"}};
static_assert(util::NamesEvery(kOutcomeNames, Outcome::kDeciderUnavailable));

constexpr util::EnumName<Stat> kStatNames[] = {
    {Stat::kPTrue, "p_true"}, {Stat::kConfidence, "confidence"}};
static_assert(util::NamesEvery(kStatNames, Stat::kConfidence));

}  // namespace

const char* OutcomeName(Outcome outcome) {
  return util::NameIn(kOutcomeNames, outcome);
}

absl::StatusOr<Outcome> ParseOutcome(std::string_view name) {
  if (auto outcome = util::ValueIn(kOutcomeNames, name)) return *outcome;
  return absl::InvalidArgumentError(absl::StrCat(
      "outcome must be one of ", util::NamesIn(kOutcomeNames, ", "), "; got \"",
      std::string(name), "\""));
}

const char* StatName(Stat stat) {
  return util::NameIn(kStatNames, stat, "confidence");
}

const Policy& Policy::Defaults() {
  static const Policy* const kDefaults =
      new Policy(DefaultThresholds(), DefaultProfiles());
  return *kDefaults;
}

absl::StatusOr<Thresholds> Policy::thresholds(
    std::string_view question_id) const {
  const auto it = thresholds_.find(std::string(question_id));
  if (it == thresholds_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no policy thresholds for question ", std::string(question_id)));
  }
  return it->second;
}

absl::StatusOr<Profile> Policy::profile(std::string_view name) const {
  const auto it = profiles_.find(std::string(name));
  if (it == profiles_.end()) {
    std::string known;
    for (const auto& [n, unused] : profiles_) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", n);
    }
    return absl::NotFoundError(absl::StrCat("no policy profile named ",
                                            std::string(name),
                                            " (known: ", known, ")"));
  }
  return it->second;
}

Outcome DecideOutcome(const DecisionRecord& record, const Thresholds& t,
                      const Profile& profile, int missing_labels) {
  if (record.answer_index < 0 || !record.probs) return Outcome::kAbstain;
  if (missing_labels > 0) return Outcome::kAbstain;
  const std::optional<double>& value =
      t.stat == Stat::kPTrue ? record.p_true : record.confidence;
  if (!value) return Outcome::kAbstain;
  const bool margin_ok = !record.margin || *record.margin >= t.margin;
  const bool level_ok =
      LevelRank(record.level) >=
      std::max(LevelRank(t.min_level), LevelRank(profile.min_level_write));
  const bool calibration_ok =
      record.calibration != Calibration::kNone &&
      profile.auto_calibrations.contains(record.calibration);
  if (t.auto_threshold && level_ok && calibration_ok &&
      *value >= *t.auto_threshold && margin_ok) {
    return Outcome::kAuto;
  }
  if (*value >= t.propose) return Outcome::kProposed;
  return Outcome::kAbstain;
}

double PyRoundDigits(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  // printf rounds the exact binary value, ties to even, as CPython's
  // float.__round__ does through its correctly rounded dtoa.
  const std::string text = absl::StrFormat("%.*f", ndigits, x);
  return std::strtod(text.c_str(), nullptr);
}

absl::StatusOr<DecisionRecord> Masked(const DecisionRecord& record,
                                      const std::vector<bool>& mask) {
  if (!record.probs) return record;
  const std::vector<double>& probs = *record.probs;
  if (mask.size() != probs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask must have one entry per option (", probs.size(),
                     " options, ", mask.size(), " mask entries)"));
  }
  std::vector<double> kept(probs.size());
  for (size_t i = 0; i < probs.size(); ++i) kept[i] = mask[i] ? probs[i] : 0.0;
  const double total = decision::PairwiseSum(kept);
  DecisionRecord out = record;
  out.diagnostics["masked_mass"] = PyRoundDigits(1.0 - total, 6);
  if (total <= 0.0) {
    out.diagnostics["mask_empty"] = true;
    out.answer_index = -1;
    out.answer = "";
    return out;
  }
  for (double& p : kept) p /= total;
  auto ranked = RankProbs(kept);
  if (!ranked.ok()) return ranked.status();
  out.probs = kept;
  out.answer_index = ranked->answer_index;
  out.answer = out.options[static_cast<size_t>(ranked->answer_index)];
  out.confidence = ranked->confidence;
  out.margin = ranked->margin;
  // Keep the noul invariant p_true == probs[0] after renormalising.
  if (out.kind == decision::QuestionKind::kNoul) out.p_true = kept[0];
  return out;
}

}  // namespace mesa_anyjev::policy
