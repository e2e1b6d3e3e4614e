// The Decider's rotation budget: adaptive shifts for choice questions, read
// in spread order in waves until the log-margin stop rule (or its
// Clopper-Pearson certificate from CalibrateAdaptive) says the answer is
// settled. Follows anyjev 0.2.0's _run_adaptive_choice.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/contextual.h"
#include "common/decision/decider.h"
#include "common/decision/decider_internal.h"
#include "common/decision/head_fit.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

using decider_internal::AnswerMass;
using decider_internal::Registry;
using decider_internal::RowOf;
using decider_internal::Stack;

std::pair<std::optional<double>, StopStat> Decider::StopRule(
    const Question& question, const Effective& eff) const {
  if (eff.adaptive_margin.has_value()) {
    return {eff.adaptive_margin, options_.adaptive_stat};
  }
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = stop_.find(question.key());
        it != stop_.end() && it->second.threshold.has_value()) {
      return {it->second.threshold, StopStat::kLogit};
    }
  }
  if (options_.adaptive_stat == StopStat::kProb) {
    return {kDefaultProbMargin, StopStat::kProb};
  }
  return {kDefaultLogMargin, StopStat::kLogit};
}

absl::StatusOr<std::vector<Decision>> Decider::RunAdaptiveChoice(
    const std::vector<std::string>& states, const Question& question,
    Level level, const Effective& eff, RunningPriors* priors,
    const CallControl& control,
    std::vector<std::vector<std::pair<double, int>>>* record) {
  const text::ChatTemplate& tmpl = backend_->chat_template();
  ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
  const std::vector<std::vector<int>> perms = Perms(question, level, eff);
  const int n_perms = static_cast<int>(perms.size());
  const int k = question.k();
  const size_t n = states.size();
  const bool want_cf =
      level != Level::kRaw &&
      (eff.prior == PriorMode::kContentFree || options_.record_content_free);
  std::optional<Matrix> cf_prior;
  if (want_cf) {
    ASSIGN_OR_RETURN(
        cf_prior, ContentFreePriorFor(question, perms, labels, eff, control));
  }
  std::vector<std::vector<std::vector<double>>> lp_rows(n);
  std::vector<std::vector<std::vector<double>>> p_rows(n);
  std::vector<std::vector<int>> used(n);
  // The running accumulator as it stood when the call began.
  Matrix sums = Matrix::Zero(n_perms, k);
  int64_t counts = 0;
  const std::string listing = ListingKey(question, perms);
  if (const auto acc = priors->Get(listing);
      acc.has_value() && acc->sum.rows() == n_perms && acc->sum.cols() == k) {
    sums = acc->sum;
    counts = acc->n;
  }
  Matrix shift_sum = Matrix::Zero(n_perms, k);
  std::vector<int64_t> shift_n(n_perms, 0);
  std::vector<size_t> active(n);
  std::iota(active.begin(), active.end(), 0);

  const std::shared_ptr<const TemperatureScaler> frozen =
      level == Level::kL1 ? ArtifactFor(eff, question.key()) : nullptr;
  const bool frozen_ok = frozen != nullptr && frozen->prior.has_value() &&
                         frozen->prior->rows() == n_perms &&
                         frozen->prior->cols() == k;
  const auto prior_for = [&](int sidx) -> std::optional<Eigen::RowVectorXd> {
    if (frozen_ok) return Eigen::RowVectorXd(frozen->prior->row(sidx));
    if (eff.prior == PriorMode::kContentFree) {
      return Eigen::RowVectorXd(cf_prior->row(sidx));
    }
    if (eff.prior != PriorMode::kBatch) return std::nullopt;
    const int64_t m = counts + shift_n[sidx];
    if (m >= options_.min_prior_n) {
      Matrix mean =
          (sums.row(sidx) + shift_sum.row(sidx)) / static_cast<double>(m);
      return Eigen::RowVectorXd(BatchPrior(mean).row(0));
    }
    // Later shifts see only the hard items: fall back to the pooled
    // position profile.
    const int64_t pooled_n =
        counts * n_perms +
        std::accumulate(shift_n.begin(), shift_n.end(), int64_t{0});
    if (pooled_n >= options_.min_prior_n) {
      Eigen::RowVectorXd total = Eigen::RowVectorXd::Zero(k);
      for (int r = 0; r < n_perms; ++r) total += sums.row(r);
      Eigen::RowVectorXd total_shift = Eigen::RowVectorXd::Zero(k);
      for (int r = 0; r < n_perms; ++r) total_shift += shift_sum.row(r);
      Matrix mean = (total + total_shift) / static_cast<double>(pooled_n);
      return Eigen::RowVectorXd(BatchPrior(mean).row(0));
    }
    return std::nullopt;
  };
  const double strength = frozen_ok ? frozen->prior_strength : Strength(eff);
  const auto corrected = [&](size_t si) {
    Matrix rows(static_cast<Eigen::Index>(used[si].size()), k);
    for (size_t j = 0; j < used[si].size(); ++j) {
      const auto prior = prior_for(used[si][j]);
      const Matrix p = RowOf(p_rows[si][j]);
      if (prior.has_value()) {
        rows.row(j) = ApplyContextual(p, PowPrior(*prior, strength)).row(0);
      } else {
        rows.row(j) = p.row(0);
      }
    }
    return rows;
  };
  const auto used_perms = [&](size_t si) {
    std::vector<std::vector<int>> out;
    for (int sidx : used[si]) out.push_back(perms[sidx]);
    return out;
  };

  std::vector<int> order(n_perms);
  if (options_.adaptive_spread_order) {
    order = SpreadOrder(n_perms);
  } else {
    std::iota(order.begin(), order.end(), 0);
  }
  auto rule = StopRule(question, eff);  // named: a lambda captures them
  std::optional<double> threshold = rule.first;
  const StopStat stat = rule.second;
  int wave = std::max(1, options_.adaptive_wave);
  std::vector<std::vector<std::pair<double, int>>> trace(n);
  if (record != nullptr) {
    // Calibration reads every shift one at a time and decides offline.
    threshold.reset();
    wave = 1;
  }
  const auto decided = [&](size_t si) {
    const Matrix pc = corrected(si);
    const std::vector<double> marg =
        Marginalize(pc, used_perms(si), eff.combine);
    if (record != nullptr) {
      trace[si].emplace_back(LogMargin(marg), ArgMax(marg));
      return false;
    }
    if (stat == StopStat::kLogit) return LogMargin(marg) >= *threshold;
    std::set<int> winners;
    for (size_t j = 0; j < used[si].size(); ++j) {
      winners.insert(perms[used[si][j]][ArgMax(&pc(j, 0), k)]);
    }
    std::vector<double> top = marg;
    std::sort(top.begin(), top.end(), std::greater<>());
    return winners.size() == 1 && top[0] - top[1] >= *threshold;
  };

  for (int start = 0; start < n_perms; start += wave) {
    const std::vector<int> batch(
        order.begin() + start, order.begin() + std::min(n_perms, start + wave));
    if (start > 0 &&
        (start >= options_.adaptive_min_shifts || record != nullptr)) {
      std::vector<size_t> still;
      for (size_t si : active) {
        if (!decided(si)) still.push_back(si);
      }
      active = std::move(still);
    }
    if (active.empty()) break;
    // One backend call per wave.
    Registry registry;
    std::vector<std::pair<size_t, int>> who;
    std::vector<size_t> rows;
    for (int r : batch) {
      const auto ids = LabelIdsForPerm(question, labels.ids, perms[r]);
      for (size_t si : active) {
        rows.push_back(
            registry.Add(RenderPromptParts(
                             tmpl, BuildPrompt(states[si], question, perms[r],
                                               options_.system, labels.labels)),
                         ids));
        who.emplace_back(si, r);
      }
    }
    ASSIGN_OR_RETURN(const auto lps, scorer_.Logprobs(registry.parts(),
                                                      registry.ids(), control));
    for (size_t i = 0; i < who.size(); ++i) {
      const auto [si, r] = who[i];
      const std::vector<double>& lp = lps[rows[i]];
      const std::vector<double> p = Softmax(lp);
      lp_rows[si].push_back(lp);
      p_rows[si].push_back(p);
      used[si].push_back(r);
      for (int j = 0; j < k; ++j) shift_sum(r, j) += p[j];
      ++shift_n[r];
    }
  }
  if (record != nullptr) {
    for (size_t si = 0; si < n; ++si) {
      decided(si);  // the margin after the final shift
      record->push_back(trace[si]);
    }
  }
  // Fold the call into the running accumulator: shift 0 (which every state
  // read) sets the count; the other shifts' partial sums are rescaled to it.
  Matrix delta = shift_sum;
  for (int r = 0; r < n_perms; ++r) {
    delta.row(r) *= static_cast<double>(shift_n[0]) /
                    static_cast<double>(std::max<int64_t>(shift_n[r], 1));
  }
  priors->Add(listing, delta, shift_n[0]);

  std::vector<Decision> out;
  for (size_t si = 0; si < n; ++si) {
    Decision decision;
    DecisionDiagnostics& diag = decision.diagnostics;
    const Matrix p_pos_raw = Stack(p_rows[si]);
    const auto perms_read = used_perms(si);
    const Matrix pc = corrected(si);
    decision.probs = Marginalize(pc, perms_read, eff.combine);
    decision.level = Level::kL0;
    diag.answer_mass = AnswerMass(lp_rows[si]);
    diag.raw_probs =
        Marginalize(p_pos_raw.topRows(1), {perms_read[0]}, Combine::kLogMean);
    diag.perms = perms_read;
    diag.prompts = static_cast<int>(perms_read.size());
    if (eff.return_details) diag.p_pos_raw = p_pos_raw;
    diag.adaptive = true;
    diag.stop_threshold = threshold;
    diag.stop_stat = stat == StopStat::kLogit ? "logit" : "prob";
    {
      absl::MutexLock lock(&mu_);
      diag.stop_calibrated = stop_.contains(question.key());
    }
    const auto first_prior = prior_for(used[si][0]);
    // The reference names the configured prior here, even when a frozen L1
    // prior is in use.
    diag.prior_method =
        first_prior.has_value() ? PriorModeName(eff.prior) : "none";
    diag.prior_strength = first_prior.has_value() ? strength : 0.0;
    if (first_prior.has_value()) {
      Matrix prior(static_cast<Eigen::Index>(used[si].size()), k);
      for (size_t j = 0; j < used[si].size(); ++j) {
        prior.row(j) = *prior_for(used[si][j]);
      }
      diag.prior = std::move(prior);
    }
    diag.order_flip_raw = FlipRateAcrossPerms(p_pos_raw, perms_read);
    diag.order_flip_l0 = FlipRateAcrossPerms(pc, perms_read);
    diag.l0_probs = decision.probs;
    if (eff.return_prompts) {
      for (int r : used[si]) {
        const text::ChatParts parts = RenderPromptParts(
            tmpl, BuildPrompt(states[si], question, perms[r], options_.system,
                              labels.labels));
        diag.prompt_texts.push_back(absl::StrCat(parts.prefix, parts.suffix));
      }
    }
    if (level == Level::kL1) {
      RETURN_IF_ERROR(ApplyL1(question, eff, &decision));
    }
    DecorateDecision(question, states[si], labels, eff, &decision);
    out.push_back(std::move(decision));
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
  const Effective eff = Resolve({});
  std::vector<std::vector<std::pair<double, int>>> record;
  RETURN_IF_ERROR(RunAdaptiveChoice(states, question, level, eff, &priors_,
                                    control, &record)
                      .status());
  std::vector<std::vector<double>> margins;
  std::vector<std::vector<int>> winners;
  for (const auto& trace : record) {
    std::vector<double> m;
    std::vector<int> w;
    for (const auto& [margin, winner] : trace) {
      m.push_back(margin);
      w.push_back(winner);
    }
    margins.push_back(std::move(m));
    winners.push_back(std::move(w));
  }
  const StopCertificate cert = ChooseThreshold(
      margins, winners, target.value_or(options_.adaptive_target),
      options_.adaptive_min_shifts, delta);
  absl::MutexLock lock(&mu_);
  stop_[question.key()] = cert;
  return cert;
}

}  // namespace mesa_anyjev::decision
