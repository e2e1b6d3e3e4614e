// L2 in the Decider: a closed-form head on the hidden state after its
// block, with label-free adaptation of its standardiser (decision-method.md
// 7); split from decider.cc, which runs the readout levels.
#include <algorithm>
#include <cmath>
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

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::RunHeads(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, const Effective& eff,
    const CallControl& control) {
  const Capabilities& caps = backend_->capabilities();
  const int n_blocks = caps.n_layers;
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < questions.size(); ++q) {
    const Question& question = questions[q];
    const std::optional<RoutedHead> routed = RouteFor(eff, question);
    if (!routed.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no L2 head for ", Describe(question)));
    }
    const HeadEntry& entry = *routed->entry;
    const int layer = entry.layer_abs;
    ASSIGN_OR_RETURN(const std::vector<Matrix> features,
                     Features(question, states, {layer}, {}, control));
    const Matrix& feats = features[0];
    // Heads are checked against the model when they load; this keeps a
    // head that slipped past (another backend, a bug) from reaching Eigen
    // with the wrong shape.
    const Eigen::Index head_k = entry.head.w.cols();
    const bool k_fits =
        routed->index_map.empty()
            ? head_k == question.k()
            : std::all_of(routed->index_map.begin(), routed->index_map.end(),
                          [&](int c) { return c >= 0 && c < head_k; });
    if (feats.cols() != entry.head.mean.size() || !k_fits) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the L2 head for ", Describe(question), " is W [",
          entry.head.w.rows(), ", ", head_k, "]; the model gives ",
          feats.cols(), " features and the question has K=", question.k()));
    }
    LinearHead adapted_head;
    const LinearHead* head = &entry.head;
    bool adapted = false;
    int64_t n_seen = 0;
    if (options_.adapt == AdaptMode::kAlways ||
        (options_.adapt == AdaptMode::kRouted && !routed->exact)) {
      // Label-free adaptation: the standardiser re-estimated from every
      // state this key was asked on, this batch included.
      // Committed with the rest of the call's effects when it succeeds.
      const AdaptationStats stats = heads_.WithFeatures(question.key(), feats);
      eff.features.emplace_back(question.key(), feats);
      n_seen = stats.n;
      if (n_seen >= options_.adapt_min_n &&
          static_cast<Eigen::Index>(stats.sum.size()) ==
              entry.head.mean.size()) {
        adapted_head = entry.head;
        const double nn = static_cast<double>(stats.n);
        for (Eigen::Index j = 0; j < adapted_head.mean.size(); ++j) {
          const double mean = stats.sum[j] / nn;
          adapted_head.mean(j) = mean;
          adapted_head.scale(j) =
              std::sqrt(std::max(stats.sumsq[j] / nn - mean * mean, 0.0)) +
              1e-6;
        }
        head = &adapted_head;
        adapted = true;
      }
    }
    Matrix probs = head->Probs(feats);
    if (!routed->index_map.empty()) {
      Matrix mapped(probs.rows(), question.k());
      for (int i = 0; i < question.k(); ++i) {
        mapped.col(i) = probs.col(routed->index_map[i]);
      }
      probs = std::move(mapped);
    }
    ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
    for (size_t s = 0; s < states.size(); ++s) {
      Decision decision;
      decision.level = Level::kL2;
      decision.probs = ToVector(probs.row(static_cast<Eigen::Index>(s)));
      DecisionDiagnostics& diag = decision.diagnostics;
      diag.readout = absl::StrCat("head:", head->kind);
      diag.exit_layer = layer;
      diag.blocks_executed = layer;
      diag.n_blocks = n_blocks;
      diag.early_stop = caps.early_stop;
      diag.temperature = head->temperature;
      diag.n_calib = head->n_calib;
      diag.listing = head->params.value("listing", std::string("canonical"));
      diag.routed_from = routed->exact ? "" : entry.question_id;
      diag.reordered = !routed->index_map.empty();
      diag.adapted = adapted;
      diag.adapt_n = static_cast<int>(n_seen);
      diag.head_version = entry.version;
      diag.perms = {Identity(question.k())};
      diag.prompts = 1;
      if (eff.return_prompts) {
        const text::ChatParts parts =
            Render(states[s], question, Identity(question.k()), labels);
        diag.prompt_texts.push_back(absl::StrCat(parts.prefix, parts.suffix));
      }
      out[s][q] = Decorate(std::move(decision), question, states[s], labels);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Matrix>> Decider::Features(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int32_t>& layers,
    const std::vector<std::vector<int>>& perms, const CallControl& control) {
  ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
  std::vector<text::ChatParts> prompts;
  for (size_t i = 0; i < states.size(); ++i) {
    const std::vector<int> perm =
        perms.empty() ? Identity(question.k()) : perms[i];
    prompts.push_back(Render(states[i], question, perm, labels));
  }
  return scorer_.HiddenStates(prompts, layers, control);
}

}  // namespace mesa_anyjev::decision
