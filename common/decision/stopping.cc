// Stopping rule and certificate (see stopping.h).
#include "common/decision/stopping.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

double LogMargin(const std::vector<double>& marginal) {
  if (marginal.size() < 2) return std::numeric_limits<double>::infinity();
  std::vector<double> p = marginal;
  std::partial_sort(p.begin(), p.begin() + 2, p.end(), std::greater<>());
  return std::log(std::max(p[0], 1e-12)) - std::log(std::max(p[1], 1e-12));
}

double BinomCdf(int k, int n, double p) {
  if (n <= 0) return 1.0;
  if (p <= 0.0) return 1.0;
  if (p >= 1.0) return k >= n ? 1.0 : 0.0;
  k = std::min(k, n);
  std::vector<double> terms;
  const double log_p = std::log(p);
  const double log_q = std::log1p(-p);
  for (int i = 0; i <= k; ++i) {
    const double log_choose =
        std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0);
    terms.push_back(log_choose + i * log_p + (n - i) * log_q);
  }
  const double top = *std::max_element(terms.begin(), terms.end());
  for (double& t : terms) t = std::exp(t - top);
  return std::exp(top) * PairwiseSum(terms);
}

double CpUpper(int k, int n, double delta, int iters) {
  if (n <= 0 || k >= n) return 1.0;
  double lo = static_cast<double>(k) / n;
  double hi = 1.0;
  for (int i = 0; i < iters; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (BinomCdf(k, n, mid) > delta) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

int StopStep(const std::vector<double>& margins, double threshold,
             int min_shifts) {
  for (size_t t = std::max(0, min_shifts - 1); t < margins.size(); ++t) {
    if (margins[t] >= threshold) return static_cast<int>(t) + 1;
  }
  return static_cast<int>(margins.size());
}

StopCertificate ChooseThreshold(const std::vector<std::vector<double>>& margins,
                                const std::vector<std::vector<int>>& winners,
                                double target, int min_shifts, double delta) {
  StopCertificate cert;
  cert.n = static_cast<int>(margins.size());
  cert.k = margins.empty() ? 0 : static_cast<int>(margins[0].size());
  cert.target = target;
  cert.delta = delta;
  // np.arange(0.0, 20.01, 0.25): start + i * step.
  for (int i = 0; i <= 80; ++i) {
    const double threshold = 0.0 + i * 0.25;
    std::vector<double> used;
    int bad = 0;
    for (int s = 0; s < cert.n; ++s) {
      const int stop = StopStep(margins[s], threshold, min_shifts);
      used.push_back(stop);
      if (winners[s][stop - 1] != winners[s].back()) ++bad;
    }
    const double bound = CpUpper(bad, cert.n, delta);
    if (bound <= target) {
      cert.threshold = threshold;
      cert.disagreements = bad;
      cert.bound = bound;
      cert.mean_shifts = Mean(used);
      cert.max_shifts =
          static_cast<int>(*std::max_element(used.begin(), used.end()));
      cert.shifts_saved = cert.k - cert.mean_shifts;
      return cert;
    }
  }
  return cert;
}

}  // namespace mesa_anyjev::decision
