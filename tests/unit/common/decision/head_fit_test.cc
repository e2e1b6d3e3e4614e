// L2 (docs/decision.md, L2: heads): numpy's legacy permutations and folds,
// default candidate blocks, the LDA Woodbury solve against the direct one,
// ridge, selection (a configuration that does not solve, ties), and the
// heads-file arrays.
#include "common/decision/head_fit.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "common/decision/legacy_random_state.h"
#include "common/decision/linear_head.h"
#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {
namespace {

using Ints = std::vector<std::vector<int>>;

TEST_CASE("numpy RandomState(0) listings", "[decision]") {
  LegacyRandomState rng4(0);
  Ints perms4;
  for (int i = 0; i < 5; ++i) perms4.push_back(rng4.Permutation(4));
  CHECK(perms4 == Ints{{2, 3, 1, 0},
                       {0, 2, 1, 3},
                       {3, 0, 2, 1},
                       {1, 0, 2, 3},
                       {1, 2, 3, 0}});
  LegacyRandomState rng5(0);
  Ints perms5;
  for (int i = 0; i < 3; ++i) perms5.push_back(rng5.Permutation(5));
  CHECK(perms5 == Ints{{2, 0, 1, 3, 4}, {0, 2, 1, 4, 3}, {1, 3, 4, 0, 2}});
}

TEST_CASE("folds", "[decision]") {
  CHECK(LegacyRandomState(0).Permutation(8) ==
        std::vector<int>{6, 2, 1, 7, 3, 0, 5, 4});
  CHECK(Folds(8, 5) == Ints{{2, 6}, {1, 7}, {0, 3}, {5}, {4}});
  CHECK(Folds(10, 5) == Ints{{2, 8}, {4, 9}, {1, 6}, {3, 7}, {0, 5}});
  CHECK(Folds(20, 5) == Ints{{1, 8, 18, 19},
                             {6, 10, 13, 17},
                             {2, 4, 5, 14},
                             {7, 9, 11, 16},
                             {0, 3, 12, 15}});
  CHECK(Folds(30, 5) == Ints{{2, 10, 13, 24, 26, 28},
                             {5, 11, 16, 17, 22, 27},
                             {1, 8, 14, 20, 23, 29},
                             {4, 6, 7, 9, 18, 19},
                             {0, 3, 12, 15, 21, 25}});
  const std::vector<int> p300 = LegacyRandomState(0).Permutation(300);
  CHECK(std::vector<int>(p300.begin(), p300.begin() + 10) ==
        std::vector<int>{208, 188, 12, 221, 239, 136, 230, 206, 52, 108});
  for (const auto& fold : Folds(300, 5)) CHECK(fold.size() == 60);
  CHECK(Folds(3, 5).size() == 3);
}

TEST_CASE("default candidate blocks", "[decision]") {
  CHECK(DefaultCandidateBlocks(36) == std::vector<int>{18, 22, 25, 31, 36});
  CHECK(DefaultCandidateBlocks(28) == std::vector<int>{14, 17, 20, 24, 28});
  CHECK(DefaultCandidateBlocks(48) == std::vector<int>{24, 29, 34, 41, 48});
  CHECK(DefaultCandidateBlocks(64) == std::vector<int>{32, 38, 45, 54, 64});
  CHECK(DefaultCandidateBlocks(10) == std::vector<int>{5, 6, 7, 8, 10});
  CHECK(DefaultCandidateBlocks(30) == std::vector<int>{15, 18, 21, 26, 30});
  CHECK(DefaultCandidateBlocks(35) == std::vector<int>{18, 21, 24, 30, 35});
  CHECK(DefaultCandidateBlocks(3) == std::vector<int>{2, 3});
  CHECK(DefaultCandidateBlocks(1) == std::vector<int>{1});
  CHECK(DefaultCandidateBlocks(4) == std::vector<int>{2, 3, 4});
}

struct Data {
  Matrix x;
  std::vector<int> y;
};

// Three Gaussian classes in 12 dims.
Data Blobs(int n, double spread, uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<double> normal;
  Data data{Matrix(n, 12), {}};
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    data.y.push_back(c);
    for (int j = 0; j < 12; ++j) {
      data.x(i, j) = (j == c ? 2.0 : 0.0) + spread * normal(engine);
    }
  }
  return data;
}

TEST_CASE("LDA through Woodbury equals the direct solve", "[decision]") {
  const Data data = Blobs(30, 1.0, 1);
  for (double a : {0.3, 0.6, 0.9, 1.0}) {
    const auto fit = SolveLda(data.x, data.y, 3, a);
    REQUIRE(fit.ok());
    // Direct: W = Sigma^-1 M with Sigma = (1-a) R'R/(n-1) + a tau I.
    Matrix means = Matrix::Zero(3, 12);
    std::vector<int> counts(3, 0);
    for (int i = 0; i < 30; ++i) {
      means.row(data.y[i]) += data.x.row(i);
      ++counts[data.y[i]];
    }
    for (int c = 0; c < 3; ++c) means.row(c) /= counts[c];
    Matrix r(30, 12);
    for (int i = 0; i < 30; ++i)
      r.row(i) = data.x.row(i) - means.row(data.y[i]);
    const double tau = r.squaredNorm() / 29.0 / 12.0;
    const Eigen::MatrixXd sigma = (1 - a) * (r.transpose() * r) / 29.0 +
                                  a * tau * Eigen::MatrixXd::Identity(12, 12);
    const Eigen::MatrixXd direct =
        sigma.ldlt().solve(Eigen::MatrixXd(means.transpose()));
    CHECK((Eigen::MatrixXd(fit->w) - direct).cwiseAbs().maxCoeff() < 1e-10);
  }
}

TEST_CASE("ridge in the dual fits one-hot targets", "[decision]") {
  const Data data = Blobs(30, 0.1, 2);
  const auto fit = SolveRidge(data.x, data.y, 3, 0.1);
  REQUIRE(fit.ok());
  Matrix scores = data.x * fit->w;
  int right = 0;
  for (int i = 0; i < 30; ++i) {
    Eigen::Index best = 0;
    (scores.row(i) + Eigen::Map<const Eigen::RowVectorXd>(fit->b.data(), 3))
        .maxCoeff(&best);
    right += best == data.y[i];
  }
  CHECK(right == 30);
}

TEST_CASE("BestHeadOfKind picks a layer by out-of-fold NLL", "[decision]") {
  const Data signal = Blobs(40, 0.5, 3);
  const Data noise = Blobs(40, 50.0, 4);
  // Layer 1 carries the signal; layer 0 is noise.
  const auto head = BestHeadOfKind({noise.x, signal.x}, signal.y, 3, "lda");
  REQUIRE(head.ok());
  CHECK(head->layer == 1);
  CHECK(head->n_calib == 40);
  CHECK(head->cv["oof_acc"].get<double>() > 0.9);
  CHECK(head->temperature > 0.0);
  CHECK(absl::IsInvalidArgument(
      BestHeadOfKind({signal.x.topRows(7)}, {0, 1, 2, 0, 1, 2, 0}, 3, "lda")
          .status()));
  // max(8, 2K): K = 5 needs 10.
  CHECK(absl::IsInvalidArgument(BestHeadOfKind({signal.x.topRows(9)},
                                               {0, 1, 2, 3, 4, 0, 1, 2, 3}, 5,
                                               "ridge")
                                    .status()));
}

TEST_CASE("BestHeadOfKind skips a configuration that does not solve",
          "[decision]") {
  const Data data = Blobs(40, 0.5, 6);
  // Constant features standardise to zero: no residual, so LDA's n x n
  // system is the zero matrix at every shrinkage, in every fold.
  const Matrix flat = Matrix::Constant(40, 12, 3.0);
  const auto head = BestHeadOfKind({flat, data.x}, data.y, 3, "lda");
  REQUIRE(head.ok());
  CHECK(head->layer == 1);
  const auto none = BestHeadOfKind({flat}, data.y, 3, "lda");
  CHECK(absl::IsFailedPrecondition(none.status()));
  CHECK(none.status().message() == "every head configuration failed to solve");
  // Ridge adds lam to the diagonal: it solves the same layer.
  const auto ridge = BestHeadOfKind({flat}, data.y, 3, "ridge");
  REQUIRE(ridge.ok());
  CHECK(ridge->layer == 0);
}

TEST_CASE(
    "BestHeadOfKind keeps the earlier layer on a tie and refits it on "
    "every row",
    "[decision]") {
  const Data noise = Blobs(40, 50.0, 7);
  const Data signal = Blobs(40, 0.5, 8);
  // Layers 1 and 2 are the same matrix, so their out-of-fold NLL is equal.
  const auto head =
      BestHeadOfKind({noise.x, signal.x, signal.x}, signal.y, 3, "ridge");
  REQUIRE(head.ok());
  CHECK(head->layer == 1);
  CHECK(head->kind == "ridge");
  CHECK(head->params.contains("lam"));
  CHECK(head->cv.contains("oof_nll"));
  CHECK(head->cv["oof_nll"].get<double>() > 0.0);
  // The refit standardises on all 40 rows, not on a fold's.
  CHECK((head->mean - ColumnMeans(signal.x)).cwiseAbs().maxCoeff() == 0.0);
  CHECK(head->w.rows() == 12);
  CHECK(head->w.cols() == 3);
  CHECK(head->b.size() == 3);
  const auto unknown = BestHeadOfKind({signal.x}, signal.y, 3, "svm");
  CHECK(absl::IsInvalidArgument(unknown.status()));
  CHECK(unknown.status().message() == "unknown head kind 'svm' (lda or ridge)");
}

TEST_CASE("heads-file arrays", "[decision]") {
  std::vector<double> w(2048 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.001 * static_cast<double>(i);
  const auto encoded = EncodeArray(w, {2048, 4});
  CHECK(encoded["dtype"] == "float32");
  CHECK(encoded["b64"].get<std::string>().size() == 43692);
  const auto decoded = DecodeArray(encoded);
  REQUIRE(decoded.ok());
  CHECK(decoded->shape == std::vector<int64_t>{2048, 4});
  CHECK(decoded->values[7] == static_cast<double>(static_cast<float>(0.007)));
  const auto nested =
      DecodeArray(nlohmann::ordered_json::parse("[[1, 2], [3, 4.5]]"));
  REQUIRE(nested.ok());
  CHECK(nested->shape == std::vector<int64_t>{2, 2});
  CHECK(nested->values[3] == 4.5);
  CHECK(!DecodeArray(nlohmann::ordered_json::parse("[[1, 2], [3]]")).ok());
}

TEST_CASE("a head survives its JSON", "[decision]") {
  const Data data = Blobs(40, 0.5, 5);
  auto head = BestHeadOfKind({data.x}, data.y, 3, "ridge");
  REQUIRE(head.ok());
  const auto json = head->ToJson();
  CHECK(json["method"] == "head:ridge");
  const auto back = LinearHead::FromJson(json);
  REQUIRE(back.ok());
  const Matrix p = head->Probs(data.x);
  const Matrix q = back->Probs(data.x);
  // float32 arrays: close, not equal.
  CHECK((p - q).cwiseAbs().maxCoeff() < 1e-4);
  CHECK(back->ToJson().dump() == json.dump());
}

}  // namespace
}  // namespace mesa_anyjev::decision
