// The few numpy reductions the decision math depends on, summed in numpy's
// order so results agree with the anyjev package to the last bits where it
// matters (ties in golden-section search, strict NLL compares): a
// contiguous 1-D sum is numpy's pairwise sum; a reduction over the leading
// axis of a matrix adds rows one after another.
#pragma once

#include <cstdint>
#include <vector>

#include "Eigen/Dense"

namespace mesa_anyjev::decision {

// Row-major like numpy, so a flat view has numpy's element order.
using Matrix =
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// numpy's pairwise_sum over n doubles `stride` apart (blocks of 8
// accumulators up to 128 elements, halves above).
double PairwiseSum(const double* a, int64_t n, int64_t stride = 1);
inline double PairwiseSum(const std::vector<double>& a) {
  return PairwiseSum(a.data(), static_cast<int64_t>(a.size()));
}

// x.mean() of a 1-D array.
double Mean(const std::vector<double>& a);

// softmax of one vector: exp(z - max) / sum (the restricted softmax of a
// prompt's label logprobs).
std::vector<double> Softmax(const std::vector<double>& z);

// Row-wise softmax of a matrix (numpy's axis=1 softmax).
Matrix RowSoftmax(const Matrix& z);

// Column means of X [n, d], rows added in order (X.mean(axis=0)).
Eigen::RowVectorXd ColumnMeans(const Matrix& x);

// argmax with numpy's tie rule: the first maximum.
int ArgMax(const double* a, int n);
inline int ArgMax(const std::vector<double>& a) {
  return ArgMax(a.data(), static_cast<int>(a.size()));
}

}  // namespace mesa_anyjev::decision
