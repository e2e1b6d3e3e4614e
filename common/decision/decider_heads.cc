// L2 in the Decider: a closed-form head on the hidden state after its
// block (decision-method.md 7), with label-free adaptation of its
// standardiser (8.2), and the hidden states it reads.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/decider.h"
#include "common/decision/decider_internal.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

using decider_internal::Describe;
using decider_internal::Identity;
using decider_internal::ToVector;

namespace {

// Whether the features [N, d] and the question fit the head (checked when
// heads load; this keeps a head that slipped past, from another backend or
// a bug, from reaching Eigen with the wrong shape).
absl::Status CheckHeadReads(const Question& question, const RoutedHead& routed,
                            const Matrix& features) {
  const LinearHead& head = routed.entry->head;
  const Eigen::Index head_k = head.w.cols();
  const bool k_fits =
      routed.index_map.empty()
          ? head_k == question.k()
          : std::all_of(routed.index_map.begin(), routed.index_map.end(),
                        [&](int c) { return c >= 0 && c < head_k; });
  if (features.cols() != head.mean.size() || !k_fits) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the L2 head for ", Describe(question), " is W [", head.w.rows(), ", ",
        head_k, "]; the model gives ", features.cols(),
        " features and the question has K=", question.k()));
  }
  return absl::OkStatus();
}

// The head's standardiser re-estimated from `stats` (label-free
// adaptation, decision-method.md 8.2).
LinearHead Adapted(const LinearHead& head, const AdaptationStats& stats) {
  LinearHead adapted = head;
  const double n = static_cast<double>(stats.n);
  for (Eigen::Index j = 0; j < adapted.mean.size(); ++j) {
    const double mean = stats.sum[j] / n;
    adapted.mean(j) = mean;
    adapted.scale(j) =
        std::sqrt(std::max(stats.sumsq[j] / n - mean * mean, 0.0)) + 1e-6;
  }
  return adapted;
}

// probs [N, head K] with its columns in the question's option order.
Matrix InQuestionOrder(Matrix probs, const RoutedHead& routed, int k) {
  if (routed.index_map.empty()) return probs;
  Matrix mapped(probs.rows(), k);
  for (int i = 0; i < k; ++i) mapped.col(i) = probs.col(routed.index_map[i]);
  return mapped;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::RunHeads(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, const Effective& eff,
    const CallControl& control) {
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < questions.size(); ++q) {
    ASSIGN_OR_RETURN(std::vector<Decision> column,
                     HeadDecisions(states, questions[q], eff, control));
    for (size_t s = 0; s < states.size(); ++s) {
      out[s][q] = std::move(column[s]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Decision>> Decider::HeadDecisions(
    const std::vector<std::string>& states, const Question& question,
    const Effective& eff, const CallControl& control) {
  const std::optional<RoutedHead> routed = RouteFor(eff, question);
  if (!routed.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no L2 head for ", Describe(question)));
  }
  const HeadEntry& entry = *routed->entry;
  ASSIGN_OR_RETURN(const std::vector<Matrix> features,
                   Features(question, states, {entry.layer_abs}, {}, control));
  const Matrix& feats = features[0];
  RETURN_IF_ERROR(CheckHeadReads(question, *routed, feats));
  const HeadUsed used = HeadFor(question, *routed, feats, eff);
  const LinearHead& head =
      used.adapted.has_value() ? *used.adapted : entry.head;
  const Matrix probs =
      InQuestionOrder(head.Probs(feats), *routed, question.k());
  ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
  const Capabilities& caps = backend_->capabilities();
  std::vector<Decision> out;
  for (size_t s = 0; s < states.size(); ++s) {
    Decision decision;
    decision.level = Level::kL2;
    decision.probs = ToVector(probs.row(static_cast<Eigen::Index>(s)));
    DecisionDiagnostics& diag = decision.diagnostics;
    diag.readout = absl::StrCat("head:", head.kind);
    diag.exit_layer = entry.layer_abs;
    diag.blocks_executed = entry.layer_abs;
    diag.n_blocks = caps.n_layers;
    diag.early_stop = caps.early_stop;
    diag.temperature = head.temperature;
    diag.n_calib = head.n_calib;
    diag.listing = head.params.value("listing", std::string("canonical"));
    diag.routed_from = routed->exact ? "" : entry.question_id;
    diag.reordered = !routed->index_map.empty();
    diag.adapted = used.adapted.has_value();
    diag.adapt_n = static_cast<int>(used.n_seen);
    diag.head_version = entry.version;
    diag.perms = {Identity(question.k())};
    diag.prompts = 1;
    if (eff.return_prompts) {
      const text::ChatParts parts =
          Render(states[s], question, Identity(question.k()), labels);
      diag.prompt_texts.push_back(absl::StrCat(parts.prefix, parts.suffix));
    }
    out.push_back(Decorate(std::move(decision), question, states[s], labels));
  }
  return out;
}

Decider::HeadUsed Decider::HeadFor(const Question& question,
                                   const RoutedHead& routed,
                                   const Matrix& features,
                                   const Effective& eff) const {
  HeadUsed used;
  if (options_.adapt == AdaptMode::kNever ||
      (options_.adapt == AdaptMode::kRouted && routed.exact)) {
    return used;
  }
  // Label-free adaptation: the standardiser re-estimated from every state
  // this key was asked on, this batch included. Committed with the rest of
  // the call's effects when it succeeds.
  const AdaptationStats stats = heads_.WithFeatures(question.key(), features);
  eff.features.emplace_back(question.key(), features);
  used.n_seen = stats.n;
  const LinearHead& head = routed.entry->head;
  if (stats.n >= options_.adapt_min_n &&
      static_cast<Eigen::Index>(stats.sum.size()) == head.mean.size()) {
    used.adapted = Adapted(head, stats);
  }
  return used;
}

absl::StatusOr<std::vector<Matrix>> Decider::Features(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int32_t>& layers,
    const std::vector<std::vector<int>>& perms, const CallControl& control) {
  ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
  std::vector<text::ChatParts> prompts;
  std::vector<int> owners;
  for (size_t i = 0; i < states.size(); ++i) {
    const std::vector<int> perm =
        perms.empty() ? Identity(question.k()) : perms[i];
    prompts.push_back(Render(states[i], question, perm, labels));
    owners.push_back(static_cast<int>(i));
  }
  return scorer_.HiddenStates(prompts, layers, control, owners);
}

}  // namespace mesa_anyjev::decision
