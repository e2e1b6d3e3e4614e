// Fitting an L2 head in closed form (docs/decision.md, L2: heads; anyjev
// heads.py fit_head): standardise on the training rows, solve shrunk LDA
// through Woodbury or ridge in the dual, pick the layer and parameter by
// 5-fold out-of-fold NLL after a temperature fit on the out-of-fold scores,
// then refit on every label keeping that out-of-fold temperature.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/linear_head.h"
#include "common/decision/numpy_ops.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

struct LinearSolution {
  Matrix w;               // [d, K]
  std::vector<double> b;  // [K]
};

// Column mean and population std + 1e-6 of X [n, d].
void Standardise(const Matrix& x, Eigen::RowVectorXd* mean,
                 Eigen::RowVectorXd* scale);

// Shrunk LDA on standardised X [n, d] with labels in [0, K): Sigma =
// (1 - a) R'R / max(1, n-1) + a tau I, W = Sigma^-1 M through an n x n
// solve, b_c = -m_c'W_c / 2 + log pi_c. FAILED_PRECONDITION when the n x n
// system is exactly singular (numpy's LinAlgError).
absl::StatusOr<LinearSolution> SolveLda(const Matrix& x,
                                        const std::vector<int>& y, int k,
                                        double shrinkage);

// Ridge onto one-hot labels, dual form: W = Xc' (Xc Xc' + lam I)^-1 Yc,
// b = mean(Y) - mean(X) W.
absl::StatusOr<LinearSolution> SolveRidge(const Matrix& x,
                                          const std::vector<int>& y, int k,
                                          double lam);

// numpy legacy RandomState(seed).permutation(n) cut by array_split into
// min(k, n) parts, each sorted.
std::vector<std::vector<int>> Folds(int n, int k, uint32_t seed = 0);

// The default search grid of a kind: lda shrinkage 0.3, 0.6, 0.9; ridge lam
// 0.1, 1, 10, 100. Each entry is the params object the head records.
std::vector<nlohmann::ordered_json> DefaultGrid(const std::string& kind);

// Sorted distinct max(1, round_half_even(f * n_blocks)) for f in 0.5, 0.6,
// 0.7, 0.85, 1.0.
std::vector<int> DefaultCandidateBlocks(int n_blocks);

// The best head of one kind (Decider::FitHead picks among kinds and stores
// the winner): features[l] = X [N, d] at candidate layer l; labels in
// [0, K). Needs N >= max(8, 2K) (INVALID_ARGUMENT otherwise). Tries every
// layer and grid entry in order; the lowest out-of-fold NLL wins, earlier on
// ties, and is refit on every label. FAILED_PRECONDITION when no
// configuration solves.
absl::StatusOr<LinearHead> BestHeadOfKind(const std::vector<Matrix>& features,
                                          const std::vector<int>& labels, int k,
                                          const std::string& kind,
                                          int n_folds = 5, uint32_t seed = 0);

}  // namespace mesa_anyjev::decision
