// DecisionRecord (docs/cli.md, decide): one answered question as the
// sidecar keeps it, from any provider. The record is "honest": probs exist
// exactly when a calibrated source produced them, an AnyJev record carries
// the level it was really served at, and a source without probabilities
// records none rather than a one-hot vector. Validate() enforces the
// invariants the sidecar's table CHECK does. One-hot probs themselves are
// not refused: masking a choice down to one allowed option (aspect "unit"
// allows only UO) legitimately renormalises to 1.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/decision/decision.h"
#include "common/decision/level.h"
#include "common/decision/question.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::policy {

// A record's level: the level an AnyJev decision was served at (never
// auto), or none (nullopt) for anything that is not AnyJev (rules, planner,
// Claude, hosted Jev). One Level enum: common/decision/level.
using RecordLevel = std::optional<decision::Level>;
inline constexpr RecordLevel kNoLevel = std::nullopt;
// "none", "raw", "L0", "L1", "L2".
const char* RecordLevelName(RecordLevel level);
// The names above exactly; anything else is INVALID_ARGUMENT naming it.
absl::StatusOr<RecordLevel> ParseRecordLevel(std::string_view name);
// LEVEL_RANK: none -1, raw 0, L0 1, L1 2, L2 3.
int LevelRank(RecordLevel level);

enum class Calibration { kAnyjev, kTypesafe, kNone };
// "anyjev", "typesafe", "none".
const char* CalibrationName(Calibration calibration);
absl::StatusOr<Calibration> ParseCalibration(std::string_view name);

// rank_probs: the argmax (first among equals, as a stable descending sort),
// its probability, and top minus second (second = 0 for one option).
// An empty list is INVALID_ARGUMENT.
struct RankedProbs {
  int answer_index = -1;
  double confidence = 0.0;
  double margin = 0.0;
};
absl::StatusOr<RankedProbs> RankProbs(const std::vector<double>& probs);

// Who produced a record from a Decision.
struct RecordSource {
  std::string model;  // backend name: "fake", a model id
  std::optional<std::string> served_model;
  std::string provider = "anyjev";
  std::string method = "anyjev";  // the wiring never overrides it
};

struct DecisionRecord {
  std::string question_id;
  std::string question_key;  // 16-hex AnyJev key
  decision::QuestionKind kind = decision::QuestionKind::kChoice;
  std::vector<std::string> options;
  nlohmann::ordered_json state = nlohmann::ordered_json::object();
  std::string state_sha256;
  std::optional<std::string> prompt_sha256;
  std::string provider;
  std::string method;
  std::string model;
  std::optional<std::string> served_model;
  RecordLevel level = kNoLevel;
  Calibration calibration = Calibration::kNone;
  std::optional<std::vector<double>> probs;  // frozen option order
  int answer_index = -1;                     // -1: abstain / no answer
  std::string answer;                        // options[answer_index] or ""
  std::optional<double> confidence;
  std::optional<double> p_true;  // noul only: probs[0]
  std::optional<double> margin;
  std::optional<double> score_value;  // score only
  // Scalars only: number, string, bool or null.
  nlohmann::ordered_json diagnostics = nlohmann::ordered_json::object();

  // The reference's AnyJev provider conversion: level downgrades (routed_from
  // -> L0 with routed_refused; L1 without a "frozen:" prior -> L0 with
  // l1_prior_missing), the diagnostics subset, rank_probs, p_true and
  // score_value, calibration anyjev. The result is validated.
  static absl::StatusOr<DecisionRecord> FromDecision(
      const decision::Decision& decision, const decision::Question& question,
      const nlohmann::ordered_json& state, const RecordSource& source);

  // A deterministic rule's answer: provider and method "rule", level and
  // calibration none, no probabilities. The pipeline gives it the outcome
  // "rule". answer_index -1 records no answer; out of range is
  // INVALID_ARGUMENT.
  static absl::StatusOr<DecisionRecord> Rule(
      const decision::Question& question, const nlohmann::ordered_json& state,
      int answer_index, std::string model = "n/a");

  // The sidecar's invariants, plus the consistency they imply (a known method,
  // answer == options[answer_index], p_true only on a noul, score_value
  // only on a score); INVALID_ARGUMENT naming the field and the limit.
  absl::Status Validate() const;

  // The record as the reference serialises it, fields in its order.
  nlohmann::ordered_json ToJson() const;
};

// meets_level: rank(record.level) >= rank(required).
bool MeetsLevel(const DecisionRecord& record, RecordLevel required);

// state_sha256: SHA-256 of json.dumps(state, sort_keys=True,
// separators=(",", ":"), ensure_ascii=False), independent of key order.
std::string StateSha256(const nlohmann::ordered_json& state);

}  // namespace mesa_anyjev::policy
