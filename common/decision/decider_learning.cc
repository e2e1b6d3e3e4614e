// The Decider's learning: L1 temperature calibration, L2 head fitting,
// observe's online fits (from labels), and the rotation budget's certified
// threshold (from unlabelled states). Follows anyjev 0.2.0's calibrate,
// fit_head, observe and calibrate_adaptive.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/call_settings.h"
#include "common/decision/decider.h"
#include "common/decision/head_fit.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/listing.h"
#include "common/decision/rotation.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

namespace {

// One option index per state, each in [0, K).
absl::Status CheckLabels(const Question& question,
                         const std::vector<std::string>& states,
                         const std::vector<int>& labels) {
  if (labels.size() != states.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("one label per state: ", labels.size(), " labels for ",
                     states.size(), " states"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= question.k()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[", i, "]: ", labels[i],
                       " is not an option index in [0, ", question.k(), ")"));
    }
  }
  return absl::OkStatus();
}

// The listing a head is fit on (auto: random for K <= 8, else canonical).
absl::StatusOr<std::string> HeadListing(const std::string& listing,
                                        const Question& question) {
  if (listing != "auto" && listing != "random" && listing != "canonical") {
    return absl::InvalidArgumentError(absl::StrCat(
        "listing '", listing, "' (expected auto, random or canonical)"));
  }
  if (listing != "auto") return listing;
  return question.k() <= 8 ? "random" : "canonical";
}

// The blocks a head may read: the defaults, or `layers` (negative ones from
// the top, n_blocks + 1 + layer) sorted and without repeats.
absl::StatusOr<std::vector<int>> CandidateBlocks(const std::vector<int>& layers,
                                                 int n_blocks) {
  if (layers.empty()) return DefaultCandidateBlocks(n_blocks);
  std::set<int> resolved;
  for (size_t i = 0; i < layers.size(); ++i) {
    const int layer = layers[i];
    const int abs = layer < 0 ? n_blocks + 1 + layer : layer;
    if (abs < 0 || abs > n_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "]: ", layer, " is outside [",
                       -(n_blocks + 1), ", ", n_blocks, "]"));
    }
    resolved.insert(abs);
  }
  return std::vector<int>(resolved.begin(), resolved.end());
}

// Each state's listing of the options for a random-listing fit (numpy's
// legacy RandomState(seed)); none (the caller's order) otherwise.
std::vector<std::vector<int>> ListingPerms(const std::string& listing,
                                           const Question& question,
                                           size_t n_states, uint32_t seed) {
  std::vector<std::vector<int>> perms;
  if (listing == "random" && !question.ordered() && question.k() > 1) {
    LegacyRandomState rng(seed);
    for (size_t i = 0; i < n_states; ++i) {
      perms.push_back(rng.Permutation(question.k()));
    }
  }
  return perms;
}

// The best head over the kinds asked for, by out-of-fold NLL (the first on
// ties); a kind that cannot be fit here is skipped.
absl::StatusOr<LinearHead> BestHead(const std::vector<Matrix>& features,
                                    const std::vector<int>& labels,
                                    const Question& question,
                                    const FitHeadOptions& options) {
  std::optional<LinearHead> best;
  for (const std::string& kind : options.kinds) {
    auto head = BestHeadOfKind(features, labels, question.k(), kind,
                               options.n_folds, options.seed);
    if (!head.ok()) {
      if (absl::IsInvalidArgument(head.status()) ||
          absl::IsFailedPrecondition(head.status())) {
        continue;
      }
      return head.status();
    }
    if (!best.has_value() ||
        head->cv["oof_nll"].get<double>() < best->cv["oof_nll"].get<double>()) {
      best = *std::move(head);
    }
  }
  if (!best.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no head could be fit for ", Describe(question),
        ": need at least max(8, 2K) labels and a solvable system"));
  }
  return *std::move(best);
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> Decider::Calibrate(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, const CallControl& control) {
  if (states.empty()) {
    return absl::InvalidArgumentError("calibration needs labelled states");
  }
  RETURN_IF_ERROR(CheckLabels(question, states, labels));
  RETURN_IF_ERROR(CheckQuestion(question, Level::kL0));
  RETURN_IF_ERROR(reader_.Labels(question).status());
  // The prior comes from the calibration set alone, in an accumulator of
  // its own, so the artifact is a function of (model, question, set); the
  // calibration sums join the running prior afterwards.
  RunningPriors isolated;
  const CallSettings call = CallSettings::Of(options_);
  ASSIGN_OR_RETURN(auto decisions, ReadLabels(states, {question}, Level::kL0,
                                              call, {}, &isolated, control));
  const std::string listing =
      ListingKey(question, Shifts(question, Level::kL0, call));
  if (const auto acc = isolated.Get(listing); acc.has_value()) {
    priors_.Of(control.tenant).Merge(listing, *acc);
  }
  Matrix probs(static_cast<Eigen::Index>(states.size()), question.k());
  for (size_t s = 0; s < states.size(); ++s) {
    for (int j = 0; j < question.k(); ++j) {
      probs(static_cast<Eigen::Index>(s), j) = decisions[s][0].probs[j];
    }
  }
  auto scaler = std::make_shared<TemperatureScaler>(
      TemperatureScaler::Fit(probs, labels));
  const DecisionDiagnostics& first = decisions[0][0].diagnostics;
  scaler->prior = first.prior;
  scaler->prior_method =
      first.prior_method.empty() ? "none" : first.prior_method;
  scaler->prior_strength = first.prior_strength;
  scaler->n_calib = static_cast<int>(states.size());
  return artifacts_.KeepL1(question.key(), std::move(scaler));
}

absl::StatusOr<nlohmann::ordered_json> Decider::FitHead(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, const FitHeadOptions& options,
    const CallControl& control) {
  const Capabilities& caps = backend_->capabilities();
  if (!caps.hidden_states) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", backend_->identity().name,
                     "' exposes no hidden states; L2 needs them"));
  }
  ASSIGN_OR_RETURN(const std::string listing,
                   HeadListing(options.listing, question));
  ASSIGN_OR_RETURN(const std::vector<int> candidates,
                   CandidateBlocks(options.layers, caps.n_layers));
  RETURN_IF_ERROR(CheckLabels(question, states, labels));
  if (static_cast<int>(labels.size()) < std::max(8, 2 * question.k())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no head could be fit for ", Describe(question),
        ": need at least max(8, 2K) = ", std::max(8, 2 * question.k()),
        " labels, got ", labels.size()));
  }
  RETURN_IF_ERROR(reader_.Labels(question).status());
  const std::vector<std::vector<int>> perms =
      ListingPerms(listing, question, states.size(), options.seed);
  ASSIGN_OR_RETURN(const std::vector<Matrix> features,
                   reader_.HiddenStates(question, states,
                                        std::vector<int32_t>(candidates.begin(),
                                                             candidates.end()),
                                        perms, control));
  ASSIGN_OR_RETURN(LinearHead best,
                   BestHead(features, labels, question, options));
  best.params["listing"] = perms.empty() ? "canonical" : listing;
  HeadEntry entry;
  entry.layer_abs = candidates[best.layer];
  entry.head = std::move(best);
  entry.question_id = question.id();
  entry.kind = question.kind();
  entry.text = question.text();
  entry.options = question.options();
  return artifacts_.KeepHead(question.key(), std::move(entry));
}

absl::StatusOr<std::optional<nlohmann::ordered_json>> Decider::Observe(
    const Question& question, const std::string& state, int label,
    const ObserveOptions& options, const CallControl& control) {
  if (label < 0 || label >= question.k()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label ", label, " is not an option index in [0, ", question.k(), ")"));
  }
  ObservationStore& observations = artifacts_.observations();
  std::optional<ObservationStore::FitDue> due = observations.Record(
      question, state, label, std::max({options.fit_at, 8, 2 * question.k()}));
  if (!due.has_value()) return std::nullopt;
  auto artifact =
      FitHead(due->question, due->states, due->labels, options.fit, control);
  observations.Fitted(question.key(), artifact.ok(), due->labels.size(),
                      options.refit_factor);
  if (!artifact.ok()) return artifact.status();
  return std::optional<nlohmann::ordered_json>(*std::move(artifact));
}

absl::StatusOr<StopCertificate> Decider::CalibrateAdaptive(
    const Question& question, const std::vector<std::string>& states,
    std::optional<double> target, double delta, Level level,
    const CallControl& control) {
  if (question.kind() != QuestionKind::kChoice || question.ordered() ||
      question.k() < 3) {
    return absl::InvalidArgumentError(
        "adaptive shifts only apply to unordered choice questions with K >= 3");
  }
  if (states.empty()) {
    return absl::InvalidArgumentError("calibrate_adaptive needs states");
  }
  if (level != Level::kL0 && level != Level::kL1 && level != Level::kRaw) {
    return absl::InvalidArgumentError("calibrate_adaptive reads raw, L0 or L1");
  }
  RETURN_IF_ERROR(ServedLevel(question, level).status());
  // Every shift read one at a time, each state's margin and winner traced;
  // the reads join the running priors.
  const CallSettings call = CallSettings::Of(options_);
  RunningPriors& running = priors_.Of(control.tenant);
  ASSIGN_OR_RETURN(
      Rotation rotation,
      StartRotation(states.size(), question, level, call,
                    artifacts_.Snapshot({question}, false), running, control));
  ASSIGN_OR_RETURN(
      const Rotation::MarginTraces traces,
      rotation.TraceMargins(reader_, states, call.combine, control));
  rotation.FoldInto(&running);
  const StopCertificate cert = ChooseThreshold(
      traces.margins, traces.winners, target.value_or(options_.adaptive_target),
      options_.adaptive_min_shifts, delta);
  stops_.Put(question.key(), cert);
  return cert;
}

}  // namespace mesa_anyjev::decision
