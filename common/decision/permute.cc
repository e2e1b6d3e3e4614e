// Shifts, orders and marginals (see permute.h).
#include "common/decision/permute.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace mesa_anyjev::decision {

std::vector<std::vector<int>> CyclicShifts(int k,
                                           std::optional<int> max_perms) {
  const int n =
      max_perms.has_value() ? std::max(1, std::min(k, *max_perms)) : k;
  std::vector<std::vector<int>> out;
  for (int s = 0; s < n; ++s) {
    std::vector<int> perm(k);
    for (int j = 0; j < k; ++j) perm[j] = (j + s) % k;
    out.push_back(std::move(perm));
  }
  return out;
}

std::vector<int> SpreadOrder(int k) {
  std::vector<int> order = {0};
  std::set<int> seen = {0};
  for (int64_t d = 2;
       static_cast<int>(order.size()) < k && d <= 4 * static_cast<int64_t>(k);
       d *= 2) {
    for (int64_t num = 1; num < d; num += 2) {
      // int(k * num / d) in float, as Python computes it.
      const int s =
          static_cast<int>(static_cast<double>(k) * static_cast<double>(num) /
                           static_cast<double>(d)) %
          k;
      if (seen.insert(s).second) order.push_back(s);
    }
  }
  for (int s = 0; s < k; ++s) {
    if (!seen.count(s)) order.push_back(s);
  }
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(k)));
  return order;
}

std::vector<int> CanonicalOrder(const std::vector<std::string>& options) {
  std::vector<int> canon(options.size());
  std::iota(canon.begin(), canon.end(), 0);
  // UTF-8 byte order is code point order.
  std::stable_sort(canon.begin(), canon.end(),
                   [&](int a, int b) { return options[a] < options[b]; });
  return canon;
}

std::vector<double> Marginalize(const Matrix& p_by_perm,
                                const std::vector<std::vector<int>>& perms,
                                Combine combine) {
  const Eigen::Index p = p_by_perm.rows();
  const Eigen::Index k = p_by_perm.cols();
  Matrix per_option = Matrix::Zero(p, k);
  for (Eigen::Index s = 0; s < p; ++s) {
    for (Eigen::Index j = 0; j < k; ++j) {
      per_option(s, perms[s][j]) = p_by_perm(s, j);
    }
  }
  std::vector<double> out(k, 0.0);
  if (combine == Combine::kLogMean) {
    for (Eigen::Index s = 0; s < p; ++s) {
      for (Eigen::Index o = 0; o < k; ++o) {
        out[o] += std::log(std::max(per_option(s, o), 1e-12));
      }
    }
    for (double& z : out) z /= static_cast<double>(p);
    const double max = *std::max_element(out.begin(), out.end());
    for (double& z : out) z = std::exp(z - max);
  } else {
    for (Eigen::Index s = 0; s < p; ++s) {
      for (Eigen::Index o = 0; o < k; ++o) out[o] += per_option(s, o);
    }
    for (double& z : out) z /= static_cast<double>(p);
  }
  const double sum = PairwiseSum(out);
  for (double& z : out) z /= sum;
  return out;
}

double FlipRateAcrossPerms(const Matrix& p_by_perm,
                           const std::vector<std::vector<int>>& perms) {
  const Eigen::Index p = p_by_perm.rows();
  if (p <= 1) return 0.0;
  std::vector<int> winners;
  for (Eigen::Index s = 0; s < p; ++s) {
    winners.push_back(
        perms[s][ArgMax(&p_by_perm(s, 0), static_cast<int>(p_by_perm.cols()))]);
  }
  std::vector<double> flips;
  for (size_t s = 1; s < winners.size(); ++s) {
    flips.push_back(winners[s] != winners[0] ? 1.0 : 0.0);
  }
  return Mean(flips);
}

}  // namespace mesa_anyjev::decision
