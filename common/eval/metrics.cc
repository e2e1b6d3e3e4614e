// The bench metrics (see metrics.h).
#include "common/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::eval {
namespace {

// Rows zero-padded to the widest row, validated with the labels.
absl::StatusOr<ProbRows> Padded(const ProbRows& probs,
                                const std::vector<int>& labels,
                                const char* what) {
  if (probs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no items (metrics need at least one)"));
  }
  if (probs.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", probs.size(),
                                                   " probability rows but ",
                                                   labels.size(), " labels"));
  }
  size_t width = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "]: an empty probability row"));
    }
    for (double p : probs[i]) {
      if (!std::isfinite(p) || p < 0.0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "[", i, "]: probability ", p,
                         " is not a finite number >= 0"));
      }
    }
    width = std::max(width, probs[i].size());
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || static_cast<size_t>(labels[i]) >= width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "labels[", i, "]: ", labels[i], " is outside [0, ", width, ")"));
    }
  }
  ProbRows out = probs;
  for (auto& row : out) row.resize(width, 0.0);
  return out;
}

int Argmax(const std::vector<double>& row) {
  return static_cast<int>(std::max_element(row.begin(), row.end()) -
                          row.begin());
}

// Item indices by top-1 confidence: ascending or descending, ties in input
// order (numpy's stable argsort of conf or of -conf).
std::vector<size_t> ByConfidence(const ProbRows& rows, bool descending) {
  std::vector<double> conf(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    conf[i] = *std::max_element(rows[i].begin(), rows[i].end());
  }
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return descending ? conf[a] > conf[b] : conf[a] < conf[b];
  });
  return order;
}

std::vector<RiskPoint> Curve(const ProbRows& rows,
                             const std::vector<int>& labels) {
  std::vector<RiskPoint> curve;
  curve.reserve(rows.size());
  int64_t errors = 0;
  const double n = static_cast<double>(rows.size());
  const std::vector<size_t> order = ByConfidence(rows, /*descending=*/true);
  for (size_t k = 0; k < order.size(); ++k) {
    if (Argmax(rows[order[k]]) != labels[order[k]]) ++errors;
    curve.push_back({static_cast<double>(k + 1) / n,
                     static_cast<double>(errors) / static_cast<double>(k + 1)});
  }
  return curve;
}

double Coverage(const std::vector<RiskPoint>& curve, double risk) {
  for (size_t j = 0; j < curve.size(); ++j) {
    if (curve[j].risk > risk) {
      return static_cast<double>(j) / static_cast<double>(curve.size());
    }
  }
  return 1.0;
}

// Items by confidence ascending (stable), cut as numpy.array_split cuts:
// the first N mod B bins one larger; empty bins left out.
std::vector<ReliabilityBin> BinsOf(const std::vector<double>& confidence,
                                   const std::vector<char>& right, int n_bins) {
  std::vector<size_t> order(confidence.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return confidence[a] < confidence[b];
  });
  const size_t n = order.size();
  const size_t base = n / static_cast<size_t>(n_bins);
  const size_t extra = n % static_cast<size_t>(n_bins);
  std::vector<ReliabilityBin> bins;
  size_t at = 0;
  for (size_t b = 0; b < static_cast<size_t>(n_bins); ++b) {
    const size_t size = base + (b < extra ? 1 : 0);
    if (size == 0) continue;
    double conf = 0.0, hits = 0.0;
    for (size_t k = at; k < at + size; ++k) {
      conf += confidence[order[k]];
      hits += right[order[k]] != 0 ? 1.0 : 0.0;
    }
    bins.push_back({static_cast<int64_t>(size),
                    conf / static_cast<double>(size),
                    hits / static_cast<double>(size)});
    at += size;
  }
  return bins;
}

std::vector<ReliabilityBin> Bins(const ProbRows& rows,
                                 const std::vector<int>& labels, int n_bins) {
  std::vector<double> confidence(rows.size());
  std::vector<char> right(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const int top = Argmax(rows[i]);
    confidence[i] = rows[i][top];
    right[i] = top == labels[i] ? 1 : 0;
  }
  return BinsOf(confidence, right, n_bins);
}

double EceOfBins(const std::vector<ReliabilityBin>& bins, double n) {
  double ece = 0.0;
  for (const ReliabilityBin& bin : bins) {
    ece += static_cast<double>(bin.count) / n *
           std::abs(bin.confidence - bin.accuracy);
  }
  return ece;
}

// F1 per class over the classes among labels and predictions (scikit-learn's
// unique_labels), 2tp / (2tp + fp + fn), averaged without weights.
double MacroF1(const std::vector<int>& predicted,
               const std::vector<int>& labels) {
  std::map<int, int64_t> tp, fp, fn;
  for (size_t i = 0; i < labels.size(); ++i) {
    tp[labels[i]] += 0;
    tp[predicted[i]] += 0;
    if (predicted[i] == labels[i]) {
      ++tp[labels[i]];
    } else {
      ++fp[predicted[i]];
      ++fn[labels[i]];
    }
  }
  double sum = 0.0;
  for (const auto& [c, t] : tp) {
    const double denom = static_cast<double>(2 * t + fp[c] + fn[c]);
    sum += denom > 0 ? 2.0 * static_cast<double>(t) / denom : 0.0;
  }
  return sum / static_cast<double>(tp.size());
}

}  // namespace

absl::StatusOr<Summary> Summarize(const ProbRows& probs,
                                  const std::vector<int>& labels,
                                  const ProbRows* flipped) {
  absl::StatusOr<ProbRows> rows = Padded(probs, labels, "probs");
  if (!rows.ok()) return rows.status();
  const size_t n = rows->size();
  const double dn = static_cast<double>(n);
  Summary s;
  s.n = static_cast<int64_t>(n);
  std::vector<int> predicted(n);
  double right = 0.0, brier = 0.0, nll = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const auto& row = (*rows)[i];
    predicted[i] = Argmax(row);
    right += predicted[i] == labels[i] ? 1.0 : 0.0;
    for (size_t k = 0; k < row.size(); ++k) {
      const double d = row[k] - (static_cast<int>(k) == labels[i] ? 1.0 : 0.0);
      brier += d * d;
    }
    nll -= std::log(std::max(row[labels[i]], kNllClip));
  }
  s.acc = right / dn;
  s.brier = brier / dn;
  s.nll = nll / dn;
  s.macro_f1 = MacroF1(predicted, labels);
  s.ece = EceOfBins(Bins(*rows, labels, kEceBins), dn);
  const std::vector<RiskPoint> curve = Curve(*rows, labels);
  s.cov5 = Coverage(curve, 0.05);
  double risk_sum = 0.0;
  for (const RiskPoint& point : curve) risk_sum += point.risk;
  s.aurc = risk_sum / dn;
  if (flipped != nullptr) {
    absl::StatusOr<ProbRows> other = Padded(*flipped, labels, "probs_flipped");
    if (!other.ok()) return other.status();
    double flips = 0.0;
    for (size_t i = 0; i < n; ++i) {
      flips += Argmax((*other)[i]) != predicted[i] ? 1.0 : 0.0;
    }
    s.flip = flips / dn;
  }
  return s;
}

double EqualMassEce(const std::vector<double>& confidence,
                    const std::vector<char>& right, int n_bins) {
  if (confidence.empty() || n_bins < 1) return 0.0;
  return EceOfBins(BinsOf(confidence, right, n_bins),
                   static_cast<double>(confidence.size()));
}

absl::StatusOr<double> CoverageAtRisk(const ProbRows& probs,
                                      const std::vector<int>& labels,
                                      double risk) {
  absl::StatusOr<ProbRows> rows = Padded(probs, labels, "probs");
  if (!rows.ok()) return rows.status();
  return Coverage(Curve(*rows, labels), risk);
}

absl::StatusOr<std::vector<ReliabilityBin>> ReliabilityBins(
    const ProbRows& probs, const std::vector<int>& labels, int n_bins) {
  if (n_bins < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_bins: ", n_bins, " is below 1"));
  }
  absl::StatusOr<ProbRows> rows = Padded(probs, labels, "probs");
  if (!rows.ok()) return rows.status();
  return Bins(*rows, labels, n_bins);
}

absl::StatusOr<std::vector<RiskPoint>> RiskCoverage(
    const ProbRows& probs, const std::vector<int>& labels) {
  absl::StatusOr<ProbRows> rows = Padded(probs, labels, "probs");
  if (!rows.ok()) return rows.status();
  return Curve(*rows, labels);
}

}  // namespace mesa_anyjev::eval
