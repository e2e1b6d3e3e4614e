// The rotation budget's waves, prior and decisions (see rotation.h).
#include "common/decision/rotation.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <utility>

#include "common/decision/contextual.h"
#include "common/decision/prompt_registry.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

namespace {

// Whether an answer is settled: its log-margin at least the threshold
// (logit), or one winner across the shifts read and a top-two gap at least
// the threshold (prob). `corrected` [P', K] is by position.
bool Settled(const Matrix& corrected,
             const std::vector<std::vector<int>>& perms, Combine combine,
             double threshold, StopStat stat) {
  const std::vector<double> marginal = Marginalize(corrected, perms, combine);
  if (stat == StopStat::kLogit) return LogMargin(marginal) >= threshold;
  std::set<int> winners;
  for (size_t j = 0; j < perms.size(); ++j) {
    winners.insert(
        perms[j][ArgMax(&corrected(j, 0), static_cast<int>(corrected.cols()))]);
  }
  std::vector<double> top = marginal;
  std::sort(top.begin(), top.end(), std::greater<>());
  return winners.size() == 1 && top[0] - top[1] >= threshold;
}

std::vector<size_t> AllStates(size_t n) {
  std::vector<size_t> out(n);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

}  // namespace

StopRule StopRuleFor(const std::optional<double>& call_margin, StopStat stat,
                     const std::optional<StopCertificate>& certified) {
  if (call_margin.has_value()) return {*call_margin, stat};
  if (certified.has_value() && certified->threshold.has_value()) {
    return {*certified->threshold, StopStat::kLogit};
  }
  if (stat == StopStat::kProb) return {kDefaultProbMargin, StopStat::kProb};
  return {kDefaultLogMargin, StopStat::kLogit};
}

Rotation::Rotation(Listing listing, std::vector<int> order, size_t n_states,
                   PriorChoice choice, std::optional<Matrix> content_free,
                   const std::optional<PriorAccumulator>& before,
                   int min_prior_n)
    : listing_(std::move(listing)),
      order_(std::move(order)),
      choice_(std::move(choice)),
      content_free_(std::move(content_free)),
      min_prior_n_(min_prior_n),
      before_sum_(Matrix::Zero(listing_.n_perms(), listing_.question.k())),
      shift_sum_(before_sum_),
      shift_n_(listing_.n_perms(), 0),
      reads_(n_states),
      shifts_(n_states) {
  if (before.has_value() && before->sum.rows() == before_sum_.rows() &&
      before->sum.cols() == before_sum_.cols()) {
    before_sum_ = before->sum;
    before_n_ = before->n;
  }
}

absl::Status Rotation::ReadInWaves(const PromptReader& reader,
                                   const std::vector<std::string>& states,
                                   const StopRule& rule, Combine combine,
                                   int wave, int min_shifts,
                                   const CallControl& control) {
  wave = std::max(1, wave);
  std::vector<size_t> active = AllStates(states.size());
  for (int start = 0; start < n_perms(); start += wave) {
    if (start > 0 && start >= min_shifts) {
      const std::optional<Matrix> prior = Prior();
      std::erase_if(active, [&](size_t s) {
        return Settled(CorrectedReadout(s, prior), reads_[s].perms, combine,
                       rule.threshold, rule.stat);
      });
    }
    if (active.empty()) break;
    RETURN_IF_ERROR(
        ReadWave(reader, states, Wave(start, wave), active, control));
  }
  return absl::OkStatus();
}

absl::StatusOr<Rotation::MarginTraces> Rotation::TraceMargins(
    const PromptReader& reader, const std::vector<std::string>& states,
    Combine combine, const CallControl& control) {
  MarginTraces traces{std::vector<std::vector<double>>(states.size()),
                      std::vector<std::vector<int>>(states.size())};
  const auto trace = [&] {
    const std::optional<Matrix> prior = Prior();
    for (size_t s = 0; s < states.size(); ++s) {
      const std::vector<double> marginal =
          Marginalize(CorrectedReadout(s, prior), reads_[s].perms, combine);
      traces.margins[s].push_back(LogMargin(marginal));
      traces.winners[s].push_back(ArgMax(marginal));
    }
  };
  const std::vector<size_t> all = AllStates(states.size());
  for (int start = 0; start < n_perms(); ++start) {
    if (start > 0) trace();
    RETURN_IF_ERROR(ReadWave(reader, states, Wave(start, 1), all, control));
  }
  trace();
  return traces;
}

std::vector<int> Rotation::Wave(int start, int count) const {
  return std::vector<int>(order_.begin() + start,
                          order_.begin() + std::min(n_perms(), start + count));
}

absl::Status Rotation::ReadWave(const PromptReader& reader,
                                const std::vector<std::string>& states,
                                const std::vector<int>& shifts,
                                const std::vector<size_t>& active,
                                const CallControl& control) {
  // Shift by shift, and within a shift state by state.
  PromptRegistry prompts;
  std::vector<size_t> rows;
  for (int shift : shifts) {
    const std::vector<int>& perm = listing_.perms[shift];
    const auto ids =
        LabelIdsForPerm(listing_.question, listing_.labels.ids, perm);
    for (size_t s : active) {
      rows.push_back(prompts.Add(
          reader.Render(states[s], listing_.question, perm, listing_.labels),
          ids, static_cast<int>(s)));
    }
  }
  ASSIGN_OR_RETURN(const auto logprobs, reader.Logprobs(prompts, control));
  size_t i = 0;
  for (int shift : shifts) {
    for (size_t state : active) {
      reads_[state].Add(listing_.perms[shift], logprobs[rows[i++]]);
      shifts_[state].push_back(shift);
      const std::vector<double>& p = reads_[state].probs.back();
      for (int j = 0; j < listing_.question.k(); ++j) {
        shift_sum_(shift, j) += p[j];
      }
      ++shift_n_[shift];
    }
  }
  return absl::OkStatus();
}

std::optional<Matrix> Rotation::Prior() const {
  return choice_.Pick(RunningBatchPrior(), content_free_);
}

std::optional<Matrix> Rotation::RunningBatchPrior() const {
  const int64_t pooled_n =
      before_n_ * n_perms() +
      std::accumulate(shift_n_.begin(), shift_n_.end(), int64_t{0});
  if (pooled_n < min_prior_n_) return std::nullopt;
  Eigen::RowVectorXd total = Eigen::RowVectorXd::Zero(before_sum_.cols());
  for (int r = 0; r < n_perms(); ++r) total += before_sum_.row(r);
  Eigen::RowVectorXd total_shift = Eigen::RowVectorXd::Zero(before_sum_.cols());
  for (int r = 0; r < n_perms(); ++r) total_shift += shift_sum_.row(r);
  const Matrix pooled =
      BatchPrior(Matrix((total + total_shift) / static_cast<double>(pooled_n)));
  Matrix prior = pooled.replicate(n_perms(), 1);
  for (int r = 0; r < n_perms(); ++r) {
    const int64_t m = before_n_ + shift_n_[r];
    if (m < min_prior_n_) continue;
    prior.row(r) = BatchPrior(Matrix((before_sum_.row(r) + shift_sum_.row(r)) /
                                     static_cast<double>(m)));
  }
  return prior;
}

Matrix Rotation::CorrectedReadout(size_t state,
                                  const std::optional<Matrix>& prior) const {
  return Corrected(reads_[state].p_pos_raw(), PriorRows(state, prior),
                   choice_.strength);
}

std::optional<Matrix> Rotation::PriorRows(
    size_t state, const std::optional<Matrix>& prior) const {
  if (!prior.has_value()) return std::nullopt;
  return RowsOf(*prior, shifts_[state]);
}

void Rotation::FoldInto(RunningPriors* priors) const {
  Matrix delta = shift_sum_;
  for (int r = 0; r < n_perms(); ++r) {
    delta.row(r) *= static_cast<double>(shift_n_[0]) /
                    static_cast<double>(std::max<int64_t>(shift_n_[r], 1));
  }
  priors->Add(listing_.key, delta, shift_n_[0]);
}

std::vector<Decision> Rotation::Decisions(
    const PromptReader& reader, const std::vector<std::string>& states,
    PriorMode configured, const StopRule& rule, bool calibrated,
    Combine combine, bool return_prompts, bool return_details) const {
  const std::optional<Matrix> prior = Prior();
  std::vector<Decision> out;
  for (size_t s = 0; s < states.size(); ++s) {
    Decision decision =
        L0Decision(reads_[s],
                   AppliedPrior{PriorRows(s, prior), choice_.strength,
                                PriorModeName(configured)},
                   combine, return_details);
    DecisionDiagnostics& diag = decision.diagnostics;
    diag.adaptive = true;
    diag.stop_threshold = rule.threshold;
    diag.stop_stat = rule.stat == StopStat::kLogit ? "logit" : "prob";
    diag.stop_calibrated = calibrated;
    if (return_prompts) {
      for (const auto& perm : diag.perms) {
        diag.prompt_texts.push_back(
            reader.Text(states[s], listing_.question, perm, listing_.labels));
      }
    }
    out.push_back(std::move(decision));
  }
  return out;
}

}  // namespace mesa_anyjev::decision
