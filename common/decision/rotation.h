// The rotation budget (docs/decision.md, Rotation budget): an unordered
// choice question's shifts read in spread order, in waves, until the stop
// rule says a state's answer is settled; the batch prior is then per shift
// over the states that read it. Also CalibrateAdaptive's reading, every
// shift one at a time with each state's margin traced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/decision/decider_options.h"
#include "common/decision/decision.h"
#include "common/decision/label_readout.h"
#include "common/decision/listing.h"
#include "common/decision/prompt_reader.h"
#include "common/decision/running_priors.h"
#include "common/decision/stopping.h"

namespace mesa_anyjev::decision {

// Stop reading a state at `threshold` on `stat`.
struct StopRule {
  double threshold;
  StopStat stat;
};
// The call's margin when it sets one (on the decider's statistic); else the
// question's certified threshold (a log margin); else the default of the
// decider's statistic.
StopRule StopRuleFor(const std::optional<double>& call_margin, StopStat stat,
                     const std::optional<StopCertificate>& certified);

// One question's shifts as a call reads them over its states, wave by wave:
// which shifts each state has read, and the call's per-shift sums, which
// with the running accumulator as the call found it make the batch prior.
class Rotation {
 public:
  // `order` is the reading order of the shifts (spread or consecutive);
  // `before` the listing's running accumulator as the call found it.
  Rotation(Listing listing, std::vector<int> order, size_t n_states,
           PriorChoice choice, std::optional<Matrix> content_free,
           const std::optional<PriorAccumulator>& before, int min_prior_n);

  const Listing& listing() const { return listing_; }
  int n_perms() const { return listing_.n_perms(); }

  // Reads the shifts over `states` in waves of `wave` shifts, one backend
  // call a wave, a state leaving once settled under `rule` (checked from
  // `min_shifts` shifts on).
  absl::Status ReadInWaves(const PromptReader& reader,
                           const std::vector<std::string>& states,
                           const StopRule& rule, Combine combine, int wave,
                           int min_shifts, const CallControl& control);
  // Each state's margin and winner after each shift it has read, [state]
  // [shift]: every shift read one at a time over every state, under the
  // prior as it stands then.
  struct MarginTraces {
    std::vector<std::vector<double>> margins;
    std::vector<std::vector<int>> winners;
  };
  absl::StatusOr<MarginTraces> TraceMargins(
      const PromptReader& reader, const std::vector<std::string>& states,
      Combine combine, const CallControl& control);

  // Adds the call's sums to the running accumulator as one change: shift 0
  // (which every state read) sets the count; the other shifts' partial sums
  // are rescaled to it.
  void FoldInto(RunningPriors* priors) const;
  // Each state's L0 decision from what it read. The diagnostics name
  // `configured` as the prior, as the package does, even when a frozen L1
  // prior is in use; `calibrated` says the stop rule's threshold was
  // certified for the question.
  std::vector<Decision> Decisions(const PromptReader& reader,
                                  const std::vector<std::string>& states,
                                  PriorMode configured, const StopRule& rule,
                                  bool calibrated, Combine combine,
                                  bool return_prompts,
                                  bool return_details) const;

 private:
  // Shifts [start, start + count) of the reading order.
  std::vector<int> Wave(int start, int count) const;
  // One backend call: each state of `active` under each of `shifts`.
  absl::Status ReadWave(const PromptReader& reader,
                        const std::vector<std::string>& states,
                        const std::vector<int>& shifts,
                        const std::vector<size_t>& active,
                        const CallControl& control);
  // The prior the call divides out now, [P, K] (nullopt: none).
  std::optional<Matrix> Prior() const;
  // The batch prior [P, K]: a shift's own once it has min_prior_n readouts
  // (the running ones and this call's), else the pooled position profile
  // (later shifts see only the hard states); none below min_prior_n pooled.
  std::optional<Matrix> RunningBatchPrior() const;
  // `state`'s readout so far, corrected by the rows of `prior` it read.
  Matrix CorrectedReadout(size_t state,
                          const std::optional<Matrix>& prior) const;
  // The rows of `prior` for the shifts `state` read, in reading order.
  std::optional<Matrix> PriorRows(size_t state,
                                  const std::optional<Matrix>& prior) const;

  Listing listing_;
  std::vector<int> order_;
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

}  // namespace mesa_anyjev::decision
