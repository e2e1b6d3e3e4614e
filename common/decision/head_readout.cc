// L2 decisions from a routed head (see head_readout.h).
#include "common/decision/head_readout.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

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

// The head's standardiser re-estimated from `stats`: W, b and T unchanged.
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

std::vector<double> RowVector(const Matrix& m, Eigen::Index row) {
  std::vector<double> out(m.cols());
  for (Eigen::Index j = 0; j < m.cols(); ++j) out[j] = m(row, j);
  return out;
}

}  // namespace

absl::StatusOr<HeadReadout> ReadHead(
    PromptReader& reader, const AdaptationStore& adaptation,
    const DeciderOptions& options, const Question& question,
    const RoutedHead& routed, const std::vector<std::string>& states,
    bool return_prompts, const CallControl& control) {
  const HeadEntry& entry = *routed.entry;
  ASSIGN_OR_RETURN(
      const std::vector<Matrix> features,
      reader.HiddenStates(question, states, {entry.layer_abs}, {}, control));
  const Matrix& feats = features[0];
  RETURN_IF_ERROR(CheckHeadReads(question, routed, feats));
  HeadReadout out;
  std::optional<LinearHead> adapted;
  int64_t n_seen = 0;  // states the adaptation statistics count
  if (options.adapt == AdaptMode::kAlways ||
      (options.adapt == AdaptMode::kRouted && !routed.exact)) {
    // The statistics of every state this key was asked on by the caller's
    // tenant (over the loaded base), this batch included.
    const AdaptationStats stats =
        adaptation.With(control.tenant, question.key(), feats);
    out.seen = feats;
    n_seen = stats.n;
    if (stats.n >= options.adapt_min_n &&
        static_cast<Eigen::Index>(stats.sum.size()) == entry.head.mean.size()) {
      adapted = Adapted(entry.head, stats);
    }
  }
  const LinearHead& head = adapted.has_value() ? *adapted : entry.head;
  const Matrix probs = InQuestionOrder(head.Probs(feats), routed, question.k());
  ASSIGN_OR_RETURN(const ResolvedLabels labels, reader.Labels(question));
  const Capabilities& caps = reader.capabilities();
  for (size_t s = 0; s < states.size(); ++s) {
    Decision decision;
    decision.level = Level::kL2;
    decision.probs = RowVector(probs, static_cast<Eigen::Index>(s));
    DecisionDiagnostics& diag = decision.diagnostics;
    diag.readout = absl::StrCat("head:", head.kind);
    diag.exit_layer = entry.layer_abs;
    diag.blocks_executed = entry.layer_abs;
    diag.n_blocks = caps.n_layers;
    diag.early_stop = caps.early_stop;
    diag.temperature = head.temperature;
    diag.n_calib = head.n_calib;
    diag.listing = head.params.value("listing", std::string("canonical"));
    diag.routed_from = routed.exact ? "" : entry.question_id;
    diag.reordered = !routed.index_map.empty();
    diag.adapted = adapted.has_value();
    diag.adapt_n = static_cast<int>(n_seen);
    diag.head_version = entry.version;
    diag.perms = {Identity(question.k())};
    diag.prompts = 1;
    if (return_prompts) {
      diag.prompt_texts.push_back(
          reader.Text(states[s], question, Identity(question.k()), labels));
    }
    out.decisions.push_back(std::move(decision));
  }
  return out;
}

}  // namespace mesa_anyjev::decision
