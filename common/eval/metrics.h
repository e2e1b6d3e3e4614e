// The AnyJev bench metrics (docs/learning.md, Metrics):
// summarize(probs, labels, probs_flipped) and coverage_at_risk, plus the
// curves the bench plots. Rows may differ in width (a choice per item);
// they are zero-padded to the widest row first, as the reference's runner
// does. The argmax is the first maximum, as numpy's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace mesa_anyjev::eval {

using ProbRows = std::vector<std::vector<double>>;

struct Summary {
  int64_t n = 0;
  double acc = 0.0;            // mean(argmax == y)
  double macro_f1 = 0.0;       // unweighted mean F1 over labels U predictions
  double brier = 0.0;          // mean of sum_k (p_k - [k == y])^2
  double nll = 0.0;            // -mean log(max(p_y, 1e-12))
  double ece = 0.0;            // top-1 confidence, 15 equal-mass bins
  double cov5 = 0.0;           // CoverageAtRisk(0.05)
  double aurc = 0.0;           // mean running risk
  std::optional<double> flip;  // only with probs_flipped
};

// INVALID_ARGUMENT (naming the row) for no rows, a row count that differs
// from the labels', an empty row, a negative or non-finite probability, or a
// label outside [0, width of the padded rows). `flipped` holds the reversed
// listing's probabilities already mapped back to the original option order.
absl::StatusOr<Summary> Summarize(const ProbRows& probs,
                                  const std::vector<int>& labels,
                                  const ProbRows* flipped = nullptr);

// The share of items answerable, in descending confidence (stable), before
// the running error rate first exceeds `risk` (strictly): (j - 1) / N at the
// first such j, or 1 when it never does.
absl::StatusOr<double> CoverageAtRisk(const ProbRows& probs,
                                      const std::vector<int>& labels,
                                      double risk);

// One equal-mass bin of the ECE: items sorted by confidence ascending
// (stable) and split as numpy.array_split does (the first N mod B bins one
// larger); empty bins are left out.
struct ReliabilityBin {
  int64_t count = 0;
  double confidence = 0.0;  // mean top-1 probability
  double accuracy = 0.0;    // share answered right
};
absl::StatusOr<std::vector<ReliabilityBin>> ReliabilityBins(
    const ProbRows& probs, const std::vector<int>& labels, int n_bins = 15);

// The ECE of items given each one's top-1 confidence and whether its top
// answer is right (`right` 0 or 1), binned as ReliabilityBins: what
// Summarize reports, for callers that resample items (agreement.h). 0 for
// no items.
double EqualMassEce(const std::vector<double>& confidence,
                    const std::vector<char>& right, int n_bins = 15);

// The risk-coverage curve: point k (1-based) is (k / N, errors_k / k) in
// descending confidence order.
struct RiskPoint {
  double coverage = 0.0;
  double risk = 0.0;
};
absl::StatusOr<std::vector<RiskPoint>> RiskCoverage(
    const ProbRows& probs, const std::vector<int>& labels);

inline constexpr int kEceBins = 15;
inline constexpr double kNllClip = 1e-12;

}  // namespace mesa_anyjev::eval
