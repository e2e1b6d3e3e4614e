// L0's label priors and their correction (docs/decision.md, L0: shifts and
// priors; anyjev calibrate/contextual.py): the batch prior (the mean readout
// over real states, per shift and position) and the content-free prior (the
// mean over the probes "N/A", "" and "[MASK]"), both clipped at 1e-8 and
// renormalised; a readout is corrected by dividing by prior^strength and
// renormalising.
#pragma once

#include <string>
#include <vector>

#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

inline constexpr double kPriorEps = 1e-8;

// The probes of the content-free prior.
const std::vector<std::string>& DefaultProbes();

// Row-wise clip(x, 1e-8) / sum: batch_prior of a mean already taken
// (sum / n), [P, K] -> [P, K].
Matrix BatchPrior(const Matrix& mean);

// The mean over C probe readouts [C, K] of one shift, clipped and
// renormalised -> [K].
Eigen::RowVectorXd ContentFreePrior(const Matrix& probe_probs);

// Row-wise clip(p / clip(prior, 1e-8), 1e-8), renormalised. `prior` is
// already raised to the strength. Shapes [P, K] (or one row).
Matrix ApplyContextual(const Matrix& p_raw, const Matrix& prior);

// prior^strength elementwise (numpy's power).
Matrix PowPrior(const Matrix& prior, double strength);

}  // namespace mesa_anyjev::decision
