// L0's permutations and their combination (docs/decision.md, L0: shifts and
// priors, Rotation budget; anyjev calibrate/permute.py): cyclic shifts of the
// options, the spread order adaptive shifts read them in, the canonical
// listing, and the marginal over the shifts read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

enum class Combine { kLogMean, kMean };

// perm_s[j] = (j + s) mod k for s = 0..n-1, n = k or max(1, min(k, max_perms)).
std::vector<std::vector<int>> CyclicShifts(int k,
                                           std::optional<int> max_perms = {});

// 0, k/2, k/4, 3k/4, ...: for d = 2, 4, 8, ... (while d <= 4k) the new values
// of floor(k * m / d) for odd m in ascending order, then whatever rounding
// skipped, ascending (anyjev's spread_order, exactly).
std::vector<int> SpreadOrder(int k);

// Option indices sorted by (option text by code point, original index).
std::vector<int> CanonicalOrder(const std::vector<std::string>& options);

// p_by_perm [P, K] by position -> [K] by option: logmean = softmax of the
// mean over shifts of log(clip(p, 1e-12)); mean = arithmetic mean,
// renormalised.
std::vector<double> Marginalize(const Matrix& p_by_perm,
                                const std::vector<std::vector<int>>& perms,
                                Combine combine);

// Fraction of shifts 1..P-1 whose winning option differs from shift 0's.
double FlipRateAcrossPerms(const Matrix& p_by_perm,
                           const std::vector<std::vector<int>>& perms);

}  // namespace mesa_anyjev::decision
