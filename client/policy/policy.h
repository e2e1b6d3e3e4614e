// The write policy (docs/annotate.md): per-question thresholds and
// profiles that map a DecisionRecord to an outcome. Only "auto" may write
// without a curator, and only a calibrated AnyJev record at a cited level and
// threshold reaches it; the shipped M5 defaults have no auto threshold
// anywhere, so the system is proposed-only.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/policy/decision_record.h"

namespace mesa_anyjev::policy {

enum class Outcome {
  kAuto,
  kProposed,
  kHuman,
  kEscalated,
  kAbstain,
  kRejected,
  kRule,
  kDeciderUnavailable,
};
// "auto", "proposed", "human", "escalated", "abstain", "rejected", "rule",
// "decider_unavailable".
const char* OutcomeName(Outcome outcome);
absl::StatusOr<Outcome> ParseOutcome(std::string_view name);

// Which number a threshold reads: a noul reads p_true, never confidence =
// max(p, 1 - p), which would accept confident rejections.
enum class Stat { kPTrue, kConfidence };
// "p_true", "confidence".
const char* StatName(Stat stat);

struct Thresholds {
  Stat stat = Stat::kConfidence;
  // "auto" in the policy file: null means proposed-only.
  std::optional<double> auto_threshold;
  double propose = 0.0;
  double margin = 0.0;
  // The lowest AnyJev level that may reach auto.
  RecordLevel min_level = decision::Level::kL1;
  // The lowest label weight that enters a fit.
  double min_weight = 0.6;
  // Where a numeric auto comes from: bench/results/<date>/<file>.json#<cell>.
  std::string cite;
};

struct Profile {
  std::string name;
  RecordLevel min_level_write = decision::Level::kL1;
  std::set<Calibration> auto_calibrations = {Calibration::kAnyjev};
  bool allow_hosted_write = false;
};

class Policy {
 public:
  // The M5 policy_defaults.yaml: thresholds for every question of the
  // reference set (auto null everywhere) and the profiles prod and dev.
  static const Policy& Defaults();

  Policy(std::map<std::string, Thresholds> thresholds,
         std::map<std::string, Profile> profiles)
      : thresholds_(std::move(thresholds)), profiles_(std::move(profiles)) {}

  // Strict lookups: NOT_FOUND naming the question id or profile name.
  absl::StatusOr<Thresholds> thresholds(std::string_view question_id) const;
  absl::StatusOr<Profile> profile(std::string_view name) const;

  const std::map<std::string, Thresholds>& all_thresholds() const {
    return thresholds_;
  }

 private:
  std::map<std::string, Thresholds> thresholds_;
  std::map<std::string, Profile> profiles_;
};

// outcome(record, t, profile, missing_labels), the first match of:
// no answer or no probs -> abstain; missing labels -> abstain; no value for
// t.stat -> abstain; auto when t.auto is set and level, calibration, value
// and margin all pass; proposed when value >= t.propose; else abstain.
// Margin, level and calibration gate only auto.
Outcome DecideOutcome(const DecisionRecord& record, const Thresholds& t,
                      const Profile& profile, int missing_labels = 0);

// masked(record, mask): keeps the options whose mask entry is true and
// renormalises, recording diagnostics.masked_mass = round(1 - kept sum, 6);
// an empty kept mass sets mask_empty and answers nothing (index -1). A
// record without probs is returned unchanged. A mask of the wrong length is
// INVALID_ARGUMENT "mask must have one entry per option".
absl::StatusOr<DecisionRecord> Masked(const DecisionRecord& record,
                                      const std::vector<bool>& mask);

// Python's round(x, ndigits) on a float: the exact binary value rounded half
// to even at `ndigits` decimals.
double PyRoundDigits(double x, int ndigits);

}  // namespace mesa_anyjev::policy
