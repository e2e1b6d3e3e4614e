// numpy-ordered reductions (see numpy_ops.h).
#include "common/decision/numpy_ops.h"

#include <algorithm>
#include <cmath>

namespace mesa_anyjev::decision {

double PairwiseSum(const double* a, int64_t n, int64_t stride) {
  // numpy/core/src/umath/loops_utils.h.src, pairwise_sum_DOUBLE.
  constexpr int64_t kBlock = 128;
  if (n < 8) {
    double res = 0.0;
    for (int64_t i = 0; i < n; ++i) res += a[i * stride];
    return res;
  }
  if (n <= kBlock) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j * stride];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[(i + j) * stride];
    }
    double res =
        ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i * stride];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2, stride) +
         PairwiseSum(a + n2 * stride, n - n2, stride);
}

double Mean(const std::vector<double>& a) {
  return PairwiseSum(a) / static_cast<double>(a.size());
}

std::vector<double> Softmax(const std::vector<double>& z) {
  const double max = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  for (size_t i = 0; i < z.size(); ++i) p[i] = std::exp(z[i] - max);
  const double sum = PairwiseSum(p);
  for (double& x : p) x /= sum;
  return p;
}

Matrix RowSoftmax(const Matrix& z) {
  Matrix out(z.rows(), z.cols());
  for (Eigen::Index i = 0; i < z.rows(); ++i) {
    const double max = z.row(i).maxCoeff();
    for (Eigen::Index j = 0; j < z.cols(); ++j) {
      out(i, j) = std::exp(z(i, j) - max);
    }
    const double sum = PairwiseSum(&out(i, 0), out.cols());
    out.row(i) /= sum;
  }
  return out;
}

Eigen::RowVectorXd ColumnMeans(const Matrix& x) {
  Eigen::RowVectorXd sum = Eigen::RowVectorXd::Zero(x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) sum += x.row(i);
  return sum / static_cast<double>(x.rows());
}

int ArgMax(const double* a, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (a[i] > a[best]) best = i;
  }
  return best;
}

}  // namespace mesa_anyjev::decision
