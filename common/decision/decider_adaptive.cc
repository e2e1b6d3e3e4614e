// The Decider's rotation budget (decision-method.md 5.9; anyjev 0.2.0's
// _run_adaptive_choice): an unordered choice question's shifts read in
// spread order, in waves, until the stop rule says a state's answer is
// settled; and the calibration of that rule (CalibrateAdaptive), which reads
// every shift one at a time and certifies a threshold offline.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/contextual.h"
#include "common/decision/decider.h"
#include "common/decision/decider_internal.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

using decider_internal::AppliedPrior;
using decider_internal::Corrected;
using decider_internal::L0Decision;
using decider_internal::Registry;
using decider_internal::RowsOf;
using decider_internal::ShiftReadout;

// One question's shifts as a call reads them over its states, wave by wave:
// which shifts each state has read, and the call's per-shift sums, which
// with the running accumulator as the call found it make the batch prior.
class Decider::Rotation {
 public:
  Rotation(Listing listing, std::vector<int> order, size_t n_states,
           PriorChoice choice, std::optional<Matrix> content_free,
           const std::optional<PriorAccumulator>& before, int min_prior_n)
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

  const Listing& listing() const { return listing_; }
  const PriorChoice& choice() const { return choice_; }
  int n_perms() const { return listing_.n_perms(); }

  // Shifts [start, start + count) of the reading order.
  std::vector<int> Wave(int start, int count) const {
    return std::vector<int>(
        order_.begin() + start,
        order_.begin() + std::min(n_perms(), start + count));
  }

  // A wave's label log-probs, shift by shift and within a shift state by
  // state (logprobs[i] is shifts[i / n] of states[i % n]).
  void Add(const std::vector<int>& shifts, const std::vector<size_t>& states,
           const std::vector<std::vector<double>>& logprobs) {
    size_t i = 0;
    for (int shift : shifts) {
      for (size_t state : states) {
        reads_[state].Add(listing_.perms[shift], logprobs[i++]);
        shifts_[state].push_back(shift);
        const std::vector<double>& p = reads_[state].probs.back();
        for (int j = 0; j < listing_.question.k(); ++j) {
          shift_sum_(shift, j) += p[j];
        }
        ++shift_n_[shift];
      }
    }
  }

  // The prior the call divides out now, [P, K] (nullopt: none).
  std::optional<Matrix> Prior() const {
    return choice_.Pick(RunningBatchPrior(), content_free_);
  }

  const ShiftReadout& readout(size_t state) const { return reads_[state]; }

  // `state`'s readout so far, corrected by the rows of `prior` it read.
  Matrix CorrectedReadout(size_t state,
                          const std::optional<Matrix>& prior) const {
    return Corrected(reads_[state].p_pos_raw(), PriorRows(state, prior),
                     choice_.strength);
  }

  // The rows of `prior` for the shifts `state` read, in reading order.
  std::optional<Matrix> PriorRows(size_t state,
                                  const std::optional<Matrix>& prior) const {
    if (!prior.has_value()) return std::nullopt;
    return RowsOf(*prior, shifts_[state]);
  }

  // Adds the call's sums to the running accumulator as one change: shift 0
  // (which every state read) sets the count; the other shifts' partial sums
  // are rescaled to it.
  void FoldInto(RunningPriors* priors) const {
    Matrix delta = shift_sum_;
    for (int r = 0; r < n_perms(); ++r) {
      delta.row(r) *= static_cast<double>(shift_n_[0]) /
                      static_cast<double>(std::max<int64_t>(shift_n_[r], 1));
    }
    priors->Add(listing_.key, delta, shift_n_[0]);
  }

 private:
  // The batch prior [P, K]: a shift's own once it has min_prior_n readouts
  // (the running ones and this call's), else the pooled position profile
  // (later shifts see only the hard states); none below min_prior_n pooled.
  std::optional<Matrix> RunningBatchPrior() const {
    const int64_t pooled_n =
        before_n_ * n_perms() +
        std::accumulate(shift_n_.begin(), shift_n_.end(), int64_t{0});
    if (pooled_n < min_prior_n_) return std::nullopt;
    Eigen::RowVectorXd total = Eigen::RowVectorXd::Zero(before_sum_.cols());
    for (int r = 0; r < n_perms(); ++r) total += before_sum_.row(r);
    Eigen::RowVectorXd total_shift =
        Eigen::RowVectorXd::Zero(before_sum_.cols());
    for (int r = 0; r < n_perms(); ++r) total_shift += shift_sum_.row(r);
    const Matrix pooled = BatchPrior(
        Matrix((total + total_shift) / static_cast<double>(pooled_n)));
    Matrix prior = pooled.replicate(n_perms(), 1);
    for (int r = 0; r < n_perms(); ++r) {
      const int64_t m = before_n_ + shift_n_[r];
      if (m < min_prior_n_) continue;
      prior.row(r) = BatchPrior(Matrix(
          (before_sum_.row(r) + shift_sum_.row(r)) / static_cast<double>(m)));
    }
    return prior;
  }

  Listing listing_;
  std::vector<int> order_;  // spread or consecutive
  PriorChoice choice_;
  std::optional<Matrix> content_free_;
  int min_prior_n_;
  Matrix before_sum_;  // the running accumulator as the call found it
  int64_t before_n_ = 0;
  Matrix shift_sum_;  // this call's readouts, per (shift, position)
  std::vector<int64_t> shift_n_;
  std::vector<ShiftReadout> reads_;
  std::vector<std::vector<int>> shifts_;
};

namespace {

// Whether an answer is settled (5.9): its log-margin at least the
// threshold (logit), or one winner across the shifts read and a top-two
// gap at least the threshold (prob). `corrected` [P', K] is by position.
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

absl::StatusOr<std::vector<Decision>> Decider::RunAdaptiveChoice(
    const std::vector<std::string>& states, const Question& question,
    Level level, const Effective& eff, RunningPriors* priors,
    const CallControl& control) {
  ASSIGN_OR_RETURN(
      Rotation rotation,
      StartRotation(states.size(), question, level, eff, *priors, control));
  const StopRule rule = StopRuleFor(question, eff);
  const int wave = std::max(1, options_.adaptive_wave);
  std::vector<size_t> active = AllStates(states.size());
  for (int start = 0; start < rotation.n_perms(); start += wave) {
    if (start > 0 && start >= options_.adaptive_min_shifts) {
      const std::optional<Matrix> prior = rotation.Prior();
      std::erase_if(active, [&](size_t s) {
        return Settled(rotation.CorrectedReadout(s, prior),
                       rotation.readout(s).perms, eff.combine, rule.threshold,
                       rule.stat);
      });
    }
    if (active.empty()) break;
    const std::vector<int> shifts = rotation.Wave(start, wave);
    ASSIGN_OR_RETURN(const auto logprobs, ScoreWave(states, rotation.listing(),
                                                    shifts, active, control));
    rotation.Add(shifts, active, logprobs);
  }
  rotation.FoldInto(priors);
  return RotationDecisions(states, rotation, level, eff, rule);
}

absl::StatusOr<std::vector<Decision>> Decider::RotationDecisions(
    const std::vector<std::string>& states, const Rotation& rotation,
    Level level, const Effective& eff, const StopRule& rule) const {
  const Listing& listing = rotation.listing();
  const std::optional<Matrix> prior = rotation.Prior();
  bool calibrated = false;
  {
    absl::MutexLock lock(&mu_);
    calibrated = stop_.contains(listing.question.key());
  }
  std::vector<Decision> out;
  for (size_t s = 0; s < states.size(); ++s) {
    // The reference names the configured prior here, even when a frozen L1
    // prior is in use.
    Decision decision = L0Decision(
        rotation.readout(s),
        AppliedPrior{rotation.PriorRows(s, prior), rotation.choice().strength,
                     PriorModeName(eff.prior)},
        eff.combine, eff.return_details);
    DecisionDiagnostics& diag = decision.diagnostics;
    diag.adaptive = true;
    diag.stop_threshold = rule.threshold;
    diag.stop_stat = rule.stat == StopStat::kLogit ? "logit" : "prob";
    diag.stop_calibrated = calibrated;
    if (eff.return_prompts) {
      for (const auto& perm : diag.perms) {
        const text::ChatParts parts =
            Render(states[s], listing.question, perm, listing.labels);
        diag.prompt_texts.push_back(absl::StrCat(parts.prefix, parts.suffix));
      }
    }
    if (level == Level::kL1) {
      ASSIGN_OR_RETURN(decision,
                       ApplyL1(listing.question, eff, std::move(decision)));
    }
    out.push_back(Decorate(std::move(decision), listing.question, states[s],
                           listing.labels));
  }
  return out;
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
  ASSIGN_OR_RETURN(const MarginTraces traces,
                   TraceMargins(states, question, level, Resolve({}), control));
  const StopCertificate cert = ChooseThreshold(
      traces.margins, traces.winners, target.value_or(options_.adaptive_target),
      options_.adaptive_min_shifts, delta);
  absl::MutexLock lock(&mu_);
  stop_[question.key()] = cert;
  return cert;
}

absl::StatusOr<Decider::MarginTraces> Decider::TraceMargins(
    const std::vector<std::string>& states, const Question& question,
    Level level, const Effective& eff, const CallControl& control) {
  ASSIGN_OR_RETURN(
      Rotation rotation,
      StartRotation(states.size(), question, level, eff, priors_, control));
  MarginTraces traces{std::vector<std::vector<double>>(states.size()),
                      std::vector<std::vector<int>>(states.size())};
  // Every state's margin and winner after each shift it has read, under the
  // prior as it stands then.
  const auto trace = [&] {
    const std::optional<Matrix> prior = rotation.Prior();
    for (size_t s = 0; s < states.size(); ++s) {
      const std::vector<double> marginal =
          Marginalize(rotation.CorrectedReadout(s, prior),
                      rotation.readout(s).perms, eff.combine);
      traces.margins[s].push_back(LogMargin(marginal));
      traces.winners[s].push_back(ArgMax(marginal));
    }
  };
  const std::vector<size_t> all = AllStates(states.size());
  for (int start = 0; start < rotation.n_perms(); ++start) {
    if (start > 0) trace();
    const std::vector<int> shift = rotation.Wave(start, 1);
    ASSIGN_OR_RETURN(const auto logprobs, ScoreWave(states, rotation.listing(),
                                                    shift, all, control));
    rotation.Add(shift, all, logprobs);
  }
  trace();
  rotation.FoldInto(&priors_);
  return traces;
}

absl::StatusOr<Decider::Rotation> Decider::StartRotation(
    size_t n_states, const Question& question, Level level,
    const Effective& eff, const RunningPriors& priors,
    const CallControl& control) {
  ASSIGN_OR_RETURN(Listing listing, ListingFor(question, level, eff));
  ASSIGN_OR_RETURN(auto content_free,
                   ContentFreePriors({listing}, level, eff, control));
  PriorChoice choice = ChoosePrior(listing, level, eff);
  std::vector<int> order(listing.n_perms());
  if (options_.adaptive_spread_order) {
    order = SpreadOrder(listing.n_perms());
  } else {
    std::iota(order.begin(), order.end(), 0);
  }
  const std::optional<PriorAccumulator> before = priors.Get(listing.key);
  return Rotation(std::move(listing), std::move(order), n_states,
                  std::move(choice), std::move(content_free[0]), before,
                  options_.min_prior_n);
}

absl::StatusOr<std::vector<std::vector<double>>> Decider::ScoreWave(
    const std::vector<std::string>& states, const Listing& listing,
    const std::vector<int>& shifts, const std::vector<size_t>& active,
    const CallControl& control) const {
  Registry prompts;
  std::vector<size_t> rows;
  for (int shift : shifts) {
    const std::vector<int>& perm = listing.perms[shift];
    const auto ids =
        LabelIdsForPerm(listing.question, listing.labels.ids, perm);
    for (size_t s : active) {
      rows.push_back(
          prompts.Add(Render(states[s], listing.question, perm, listing.labels),
                      ids, static_cast<int>(s)));
    }
  }
  ASSIGN_OR_RETURN(const auto logprobs, Score(prompts, control));
  std::vector<std::vector<double>> out;
  for (size_t row : rows) out.push_back(logprobs[row]);
  return out;
}

Decider::StopRule Decider::StopRuleFor(const Question& question,
                                       const Effective& eff) const {
  if (eff.adaptive_margin.has_value()) {
    return {*eff.adaptive_margin, options_.adaptive_stat};
  }
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = stop_.find(question.key());
        it != stop_.end() && it->second.threshold.has_value()) {
      return {*it->second.threshold, StopStat::kLogit};
    }
  }
  if (options_.adaptive_stat == StopStat::kProb) {
    return {kDefaultProbMargin, StopStat::kProb};
  }
  return {kDefaultLogMargin, StopStat::kLogit};
}

}  // namespace mesa_anyjev::decision
