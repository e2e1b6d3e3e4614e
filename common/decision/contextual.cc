// Priors and the contextual correction (see contextual.h).
#include "common/decision/contextual.h"

#include <algorithm>
#include <cmath>

namespace mesa_anyjev::decision {
namespace {

// Clip each row at kPriorEps and divide by its pairwise sum.
Matrix ClipNormalize(Matrix m) {
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      m(i, j) = std::max(m(i, j), kPriorEps);
    }
    const double sum = PairwiseSum(&m(i, 0), m.cols());
    m.row(i) /= sum;
  }
  return m;
}

}  // namespace

const std::vector<std::string>& DefaultProbes() {
  static const auto* probes = new std::vector<std::string>{"N/A", "", "[MASK]"};
  return *probes;
}

Matrix BatchPrior(const Matrix& mean) { return ClipNormalize(mean); }

Eigen::RowVectorXd ContentFreePrior(const Matrix& probe_probs) {
  Matrix mean = ColumnMeans(probe_probs);
  return ClipNormalize(std::move(mean)).row(0);
}

Matrix ApplyContextual(const Matrix& p_raw, const Matrix& prior) {
  Matrix out(p_raw.rows(), p_raw.cols());
  for (Eigen::Index i = 0; i < p_raw.rows(); ++i) {
    for (Eigen::Index j = 0; j < p_raw.cols(); ++j) {
      out(i, j) = p_raw(i, j) / std::max(prior(i, j), kPriorEps);
    }
  }
  return ClipNormalize(std::move(out));
}

Matrix PowPrior(const Matrix& prior, double strength) {
  Matrix out(prior.rows(), prior.cols());
  for (Eigen::Index i = 0; i < prior.rows(); ++i) {
    for (Eigen::Index j = 0; j < prior.cols(); ++j) {
      out(i, j) = std::pow(prior(i, j), strength);
    }
  }
  return out;
}

}  // namespace mesa_anyjev::decision
