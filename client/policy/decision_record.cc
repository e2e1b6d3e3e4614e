// DecisionRecord conversion, invariants and serialisation (see
// decision_record.h).
#include "client/policy/decision_record.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_json.h"
#include "common/text/json_null.h"
#include "common/util/enum_names.h"
#include "common/util/hash.h"

namespace mesa_anyjev::policy {
namespace {

using Json = nlohmann::ordered_json;
using decision::QuestionKind;

constexpr std::array<const char*, 7> kMethods = {"anyjev",
                                                 "fake",
                                                 "rule",
                                                 "planner",
                                                 "claude:structured_output",
                                                 "hosted:prompt_jev",
                                                 "unavailable"};

constexpr double kSumTolerance = 1e-3;

// The provider's diagnostics subset, in its key order, holding only the keys
// the anyjev Decider sets at the decision's level: raw has answer_mass and
// permutations; L0 and L1 add the prior and order-flip entries (L1 also the
// temperature; adaptive shifts add shifts_used); L2 carries the head's
// entries instead.
Json DiagnosticsSubset(const decision::Decision& d) {
  const decision::DecisionDiagnostics& g = d.diagnostics;
  const bool l2 = d.level == decision::Level::kL2;
  const bool l0_or_l1 =
      d.level == decision::Level::kL0 || d.level == decision::Level::kL1;
  Json out = Json::object();
  if (!l2 && g.answer_mass) out["answer_mass"] = *g.answer_mass;
  if (l0_or_l1) {
    out["prior_method"] = g.prior_method;
    out["prior_strength"] = g.prior_strength;
    out["order_flip_raw"] = text::OrNull(g.order_flip_raw);
    out["order_flip_l0"] = text::OrNull(g.order_flip_l0);
  }
  out["permutations"] = static_cast<int64_t>(g.perms.size());
  if (g.adaptive && !l2) {
    out["shifts_used"] = static_cast<int64_t>(g.perms.size());
  }
  if (d.level == decision::Level::kL1 || l2) {
    out["temperature"] = text::OrNull(g.temperature);
  }
  if (l2) {
    out["n_calib"] = g.n_calib;
    out["routed_from"] =
        g.routed_from.empty() ? Json(nullptr) : Json(g.routed_from);
    out["adapted"] = g.adapted;
    out["adapt_n"] = g.adapt_n;
    out["blocks_executed"] = g.blocks_executed;
    out["exit_layer"] = g.exit_layer;
    out["readout"] = g.readout;
  }
  if (!g.served_by.empty()) {
    out["served_by"] = g.served_by;
    out["failover"] = g.failover;
  }
  return out;
}

absl::StatusOr<RecordLevel> FromDecisionLevel(decision::Level level) {
  if (level == decision::Level::kAuto) {
    return absl::InvalidArgumentError(
        "a decision's level is what it was served at, never auto");
  }
  return level;
}

constexpr util::EnumName<Calibration> kCalibrationNames[] = {
    {Calibration::kAnyjev, "anyjev"},
    {Calibration::kTypesafe, "typesafe"},
    {Calibration::kNone, "none"}};
static_assert(util::NamesEvery(kCalibrationNames, Calibration::kNone));

}  // namespace

const char* RecordLevelName(RecordLevel level) {
  return level.has_value() ? decision::LevelName(*level) : "none";
}

absl::StatusOr<RecordLevel> ParseRecordLevel(std::string_view name) {
  if (name == "none") return kNoLevel;
  auto level = decision::ParseLevel(name);
  if (!level.ok() || *level == decision::Level::kAuto) {
    return absl::InvalidArgumentError(
        absl::StrCat("level must be one of none, raw, L0, L1, L2; got \"",
                     std::string(name), "\""));
  }
  return *level;
}

int LevelRank(RecordLevel level) {
  return level.has_value() ? decision::LevelRank(*level) : -1;
}

const char* CalibrationName(Calibration calibration) {
  return util::NameIn(kCalibrationNames, calibration);
}

absl::StatusOr<Calibration> ParseCalibration(std::string_view name) {
  if (auto calibration = util::ValueIn(kCalibrationNames, name)) {
    return *calibration;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "calibration must be one of ", util::NamesIn(kCalibrationNames, ", "),
      "; got \"", std::string(name), "\""));
}

absl::StatusOr<RankedProbs> RankProbs(const std::vector<double>& probs) {
  if (probs.empty()) {
    return absl::InvalidArgumentError("rank_probs needs at least one prob");
  }
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return probs[a] > probs[b]; });
  RankedProbs ranked;
  ranked.answer_index = order[0];
  ranked.confidence = probs[order[0]];
  const double second = probs.size() > 1 ? probs[order[1]] : 0.0;
  ranked.margin = ranked.confidence - second;
  return ranked;
}

bool MeetsLevel(const DecisionRecord& record, RecordLevel required) {
  return LevelRank(record.level) >= LevelRank(required);
}

std::string StateSha256(const nlohmann::ordered_json& state) {
  return util::Sha256Hex(decision::PyJsonCanonical(state));
}

absl::StatusOr<DecisionRecord> DecisionRecord::FromDecision(
    const decision::Decision& decision, const decision::Question& question,
    const nlohmann::ordered_json& state, const RecordSource& source) {
  if (decision.question_key != question.key()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decision is for question key ", decision.question_key, ", not for ",
        question.id(), " (key ", question.key(), ")"));
  }
  auto level = FromDecisionLevel(decision.level);
  if (!level.ok()) return level.status();
  auto ranked = RankProbs(decision.probs);
  if (!ranked.ok()) return ranked.status();

  DecisionRecord r;
  r.question_id = question.id();
  r.question_key = question.key();
  r.kind = question.kind();
  r.options = question.options();
  r.state = state;
  r.state_sha256 = StateSha256(state);
  if (!decision.diagnostics.prompt_sha256.empty()) {
    r.prompt_sha256 = decision.diagnostics.prompt_sha256;
  }
  r.provider = source.provider;
  r.method = source.method;
  r.model = source.model;
  r.served_model = source.served_model;
  r.level = *level;
  r.calibration = Calibration::kAnyjev;
  r.probs = decision.probs;
  r.answer_index = ranked->answer_index;
  r.answer = r.options[static_cast<size_t>(ranked->answer_index)];
  r.confidence = ranked->confidence;
  r.margin = ranked->margin;
  if (r.kind == QuestionKind::kNoul) r.p_true = decision.probs[0];
  if (r.kind == QuestionKind::kScore) r.score_value = decision.score_value;
  r.diagnostics = DiagnosticsSubset(decision);

  // AnyJev's route() may serve a key from another question's head; that is
  // not a calibration of this question (docs/reference.md, Exact-key levels).
  if (!decision.diagnostics.routed_from.empty()) {
    r.level = decision::Level::kL0;
    r.diagnostics["routed_refused"] = true;
  }
  // An L1 temperature fitted over a frozen prior means nothing on top of a
  // running one (docs/reference.md, Fits freeze their prior).
  if (r.level == decision::Level::kL1 &&
      !absl::StartsWith(decision.diagnostics.prior_method, "frozen:")) {
    r.level = decision::Level::kL0;
    r.diagnostics["l1_prior_missing"] = true;
  }
  if (absl::Status valid = r.Validate(); !valid.ok()) return valid;
  return r;
}

absl::StatusOr<DecisionRecord> DecisionRecord::Rule(
    const decision::Question& question, const nlohmann::ordered_json& state,
    int answer_index, std::string model) {
  if (answer_index < -1 || answer_index >= question.k()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule answer_index must be -1 or in [0, ", question.k(),
                     ") for ", question.id(), "; got ", answer_index));
  }
  DecisionRecord r;
  r.question_id = question.id();
  r.question_key = question.key();
  r.kind = question.kind();
  r.options = question.options();
  r.state = state;
  r.state_sha256 = StateSha256(state);
  r.provider = "rule";
  r.method = "rule";
  r.model = std::move(model);
  r.level = kNoLevel;
  r.calibration = Calibration::kNone;
  r.answer_index = answer_index;
  if (answer_index >= 0) {
    r.answer = r.options[static_cast<size_t>(answer_index)];
  }
  return r;
}

absl::Status DecisionRecord::Validate() const {
  const auto invalid = [this](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("record for ", question_id, ": ", parts...));
  };
  if (std::find(kMethods.begin(), kMethods.end(), method) == kMethods.end()) {
    return invalid("method must be one of ", absl::StrJoin(kMethods, ", "),
                   "; got \"", method, "\"");
  }
  if (probs.has_value() != (calibration != Calibration::kNone)) {
    return invalid("probs must be null exactly when calibration is none (",
                   "calibration ", CalibrationName(calibration), ", probs ",
                   probs ? "present" : "null", ")");
  }
  if (level == decision::Level::kAuto) {
    return invalid(
        "level auto is a request, never what a record was served at");
  }
  if (calibration == Calibration::kAnyjev && level == kNoLevel) {
    return invalid("calibration anyjev requires a level other than none");
  }
  if (calibration != Calibration::kAnyjev && level != kNoLevel) {
    return invalid("calibration ", CalibrationName(calibration),
                   " requires level none, got ", RecordLevelName(level));
  }
  if (probs) {
    if (probs->size() != options.size()) {
      return invalid("probs has ", probs->size(), " entries for ",
                     options.size(), " options");
    }
    double sum = 0.0;
    for (size_t i = 0; i < probs->size(); ++i) {
      const double p = (*probs)[i];
      if (!(p >= 0.0)) return invalid("probs[", i, "] = ", p, " is below 0");
      sum += p;
    }
    if (!(std::abs(sum - 1.0) <= kSumTolerance)) {
      return invalid("probs sum to ", sum, ", more than ", kSumTolerance,
                     " from 1");
    }
    if (kind == QuestionKind::kNoul && !p_true) {
      return invalid("a noul with probs must carry p_true");
    }
  }
  if (p_true && kind != QuestionKind::kNoul) {
    return invalid("p_true is for noul questions only, this is a ",
                   decision::QuestionKindName(kind));
  }
  if (score_value && kind != QuestionKind::kScore) {
    return invalid("score_value is for score questions only, this is a ",
                   decision::QuestionKindName(kind));
  }
  if (answer_index < -1 || answer_index >= static_cast<int>(options.size())) {
    return invalid("answer_index must be -1 or below ", options.size(),
                   "; got ", answer_index);
  }
  const std::string expected =
      answer_index < 0 ? "" : options[static_cast<size_t>(answer_index)];
  if (answer != expected) {
    return invalid("answer \"", answer, "\" is not options[", answer_index,
                   "] \"", expected, "\"");
  }
  for (const auto& [name, value] : diagnostics.items()) {
    if (value.is_object() || value.is_array()) {
      return invalid("diagnostics.", name, " is not a scalar");
    }
  }
  return absl::OkStatus();
}

nlohmann::ordered_json DecisionRecord::ToJson() const {
  return Json{
      {"question_id", question_id},
      {"question_key", question_key},
      {"kind", decision::QuestionKindName(kind)},
      {"options", options},
      {"state", state},
      {"state_sha256", state_sha256},
      {"prompt_sha256", text::OrNull(prompt_sha256)},
      {"provider", provider},
      {"method", method},
      {"model", model},
      {"served_model", text::OrNull(served_model)},
      {"level", RecordLevelName(level)},
      {"calibration", CalibrationName(calibration)},
      {"probs", probs ? Json(*probs) : Json(nullptr)},
      {"answer_index", answer_index},
      {"answer", answer},
      {"confidence", text::OrNull(confidence)},
      {"p_true", text::OrNull(p_true)},
      {"margin", text::OrNull(margin)},
      {"score_value", text::OrNull(score_value)},
      {"diagnostics", diagnostics},
  };
}

}  // namespace mesa_anyjev::policy
