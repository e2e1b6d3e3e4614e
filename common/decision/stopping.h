// The rotation budget's stopping rule and its label-free certificate
// (docs/decision.md, Rotation budget; anyjev calibrate/stopping.py): the
// log-odds margin of a marginal, the Clopper-Pearson upper bound on a
// disagreement rate, and the cheapest threshold whose disagreement with the
// full-K answer is certified under a target.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mesa_anyjev::decision {

inline constexpr double kDefaultLogMargin = 8.5;
inline constexpr double kDefaultProbMargin = 0.1;

// log(max(p1, 1e-12)) - log(max(p2, 1e-12)) of the two largest entries;
// +inf for fewer than two.
double LogMargin(const std::vector<double>& marginal);

// P[X <= k], X ~ Binomial(n, p), summed in log space with lgamma.
double BinomCdf(int k, int n, double p);

// The largest failure rate consistent with k failures in n draws at
// confidence 1 - delta: 1 when k >= n or n <= 0, else 60 bisections on
// [k/n, 1].
double CpUpper(int k, int n, double delta = 0.05, int iters = 60);

// Shifts a rule with this threshold reads: the first t >= min_shifts
// (1-based) with margins[t-1] >= threshold, else margins.size().
int StopStep(const std::vector<double>& margins, double threshold,
             int min_shifts);

struct StopCertificate {
  std::optional<double> threshold;  // none: read every shift
  int n = 0;
  int k = 0;
  double target = 0.01;
  double delta = 0.05;
  // Set when a threshold was certified.
  int disagreements = 0;
  double bound = 1.0;
  double mean_shifts = 0.0;
  int max_shifts = 0;
  double shifts_saved = 0.0;
};

// margins, winners: [N][K] running log-margin and winning option after
// 1..K shifts in reading order. Scans 0, 0.25, ..., 20 and returns the
// first threshold whose disagreement with winners[:, K-1] has
// CpUpper <= target.
StopCertificate ChooseThreshold(const std::vector<std::vector<double>>& margins,
                                const std::vector<std::vector<int>>& winners,
                                double target = 0.01, int min_shifts = 2,
                                double delta = 0.05);

}  // namespace mesa_anyjev::decision
