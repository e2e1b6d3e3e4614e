// Whether two models decide alike (docs/learning.md, bench compare): the
// same labelled states decided by model a and model b, compared item by
// item. The flip rate (answers that differ) gets a Wilson interval; each
// model's accuracy, log loss and ECE get the paired difference a - b with a
// percentile bootstrap interval over the states, resampled with numpy's
// legacy RandomState(seed).randint(0, n, size=(resamples, n)) so a Python
// oracle draws the very same resamples.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/eval/metrics.h"

namespace mesa_anyjev::eval {

// The normal quantile of 0.975: every interval here is a 95% one.
inline constexpr double kZ95 = 1.959963984540054;

struct Interval {
  double lo = 0.0;
  double hi = 0.0;
};

// The Wilson score interval of `k` successes in `n` trials at `z`
// (scipy.stats.binomtest(k, n).proportion_ci(method="wilson")); n >= 1.
Interval WilsonInterval(int64_t k, int64_t n, double z = kZ95);

// numpy.percentile(values, q) (method "linear"), q in [0, 100]; `values`
// non-empty.
double Percentile(std::vector<double> values, double q);

// 0.5 * sum_k |a_k - b_k| over the rows zero-padded to one width: for a
// yes/no question exactly |p_a - p_b| of Yes.
double TotalVariation(const std::vector<double>& a,
                      const std::vector<double>& b);

struct ModelFigures {
  double acc = 0.0;
  double nll = 0.0;  // log loss: -mean log max(p_y, 1e-12)
  double ece = 0.0;  // 15 equal-mass bins, as Summarize
};

// a's figure minus b's, and its bootstrap interval.
struct PairedDifference {
  double value = 0.0;
  Interval interval;
};

struct BootstrapOptions {
  int32_t resamples = 2000;
  uint32_t seed = 0;
};

struct Agreement {
  int64_t n = 0;
  int64_t flips = 0;         // states whose answer (argmax) differs
  double flip_rate = 0.0;    // flips / n
  Interval flip_interval;    // Wilson, 95%
  double mean_abs_dp = 0.0;  // mean TotalVariation(a_i, b_i)
  double p95_abs_dp = 0.0;   // its 95th percentile
  ModelFigures a;
  ModelFigures b;
  PairedDifference acc;
  PairedDifference nll;
  PairedDifference ece;
  BootstrapOptions bootstrap;
};

// INVALID_ARGUMENT as Summarize for malformed rows or labels (naming which
// model's), when a and b differ in count, or when resamples is below 1.
absl::StatusOr<Agreement> CompareModels(const ProbRows& a, const ProbRows& b,
                                        const std::vector<int>& labels,
                                        const BootstrapOptions& options = {});

// What "the two models agree" means (docs/learning.md says why these
// defaults): the flip rate's upper bound at most max_flip, and the
// accuracy difference's interval inside [-max_acc_diff, max_acc_diff].
struct Tolerances {
  double max_flip = 0.10;
  double max_acc_diff = 0.03;
};
bool Agrees(const Agreement& agreement, const Tolerances& tolerances);

}  // namespace mesa_anyjev::eval
