// raw, L0 and L1 from label log-probs (docs/decision.md, raw; L0: shifts and
// priors; L1: temperature): what one state read under a question's shifts,
// the prior an L0 decision divides out, and the decisions made from them.
// Values in, values out; ReadShifts alone calls the model.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/decision/decider_options.h"
#include "common/decision/decision.h"
#include "common/decision/listing.h"
#include "common/decision/numpy_ops.h"
#include "common/decision/permute.h"
#include "common/decision/prompt_reader.h"
#include "common/decision/temperature_scaler.h"

namespace mesa_anyjev::decision {

// What one state read under a question's shifts, in reading order: the
// shifts, the label log-probs [P'][K] and their softmax, and the prompt
// texts when the call asked for them.
struct ShiftReadout {
  std::vector<std::vector<int>> perms;
  std::vector<std::vector<double>> logprobs;
  std::vector<std::vector<double>> probs;
  std::vector<std::string> prompts;

  void Add(const std::vector<int>& perm, const std::vector<double>& lp);
  // p_pos_raw [P', K]: row j is the readout of shift perms[j] by position.
  Matrix p_pos_raw() const;
};

// Every state under each shift of each listing, each distinct prompt once,
// in one backend call: result[listing][state]. The prompt texts are kept
// when `keep_prompts`.
absl::StatusOr<std::vector<std::vector<ShiftReadout>>> ReadShifts(
    const PromptReader& reader, const std::vector<std::string>& states,
    const std::vector<Listing>& listings, bool keep_prompts,
    const CallControl& control);
// The readouts' p_pos_raw summed, [P, K]: what a batch adds to the running
// prior of its listing.
Matrix BatchSum(const Listing& listing, const std::vector<ShiftReadout>& reads);

// The prior L0 divides out of a question's readouts in one call: an L1
// artifact's frozen prior where it has the listing's shape, else the
// call's mode (batch, content-free, none).
struct PriorChoice {
  PriorMode mode;
  std::shared_ptr<const TemperatureScaler> frozen;  // set when it applies
  double strength;

  // The prior [P, K], given the batch and content-free priors the call has.
  std::optional<Matrix> Pick(const std::optional<Matrix>& batch,
                             const std::optional<Matrix>& content_free) const;
  // What the diagnostics call it: "frozen:<method>" or the mode's name.
  std::string Name() const;
};
// `l1` is the question's L1 artifact when it is read at L1 (else null).
PriorChoice ChoosePrior(const Listing& listing,
                        std::shared_ptr<const TemperatureScaler> l1,
                        PriorMode mode, const DeciderOptions& options);

// The prior an L0 decision divides out: rows [P', K] for the shifts its
// readout read (none: no prior), the exponent, and the name the
// diagnostics give it.
struct AppliedPrior {
  std::optional<Matrix> rows;
  double strength = 0.0;
  std::string method;
};

// p_pos_raw divided by prior^strength, row by row, renormalised; unchanged
// without a prior.
Matrix Corrected(const Matrix& p_pos_raw, const std::optional<Matrix>& prior,
                 double strength);
// Rows `index` of `m`, in that order.
Matrix RowsOf(const Matrix& m, const std::vector<int>& index);

// raw: the first shift's restricted softmax (the caller's order), with what
// every label readout carries (answer mass, shifts, raw probabilities).
Decision RawDecision(const ShiftReadout& read, bool details);
// L0: every shift corrected by `prior`, combined over the shifts.
Decision L0Decision(const ShiftReadout& read, const AppliedPrior& prior,
                    Combine combine, bool details);
// L1: an L0 decision calibrated with the question's temperature.
Decision WithTemperature(const TemperatureScaler& l1, Decision decision);

}  // namespace mesa_anyjev::decision
