// Closed-form head fitting (see head_fit.h).
#include "common/decision/head_fit.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/temperature_scaler.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {
namespace {

// np.linalg.solve(a, b): LU with partial pivoting; an exactly zero pivot is
// LAPACK's "singular" (LinAlgError).
absl::StatusOr<Eigen::MatrixXd> Solve(const Eigen::MatrixXd& a,
                                      const Eigen::MatrixXd& b) {
  Eigen::PartialPivLU<Eigen::MatrixXd> lu(a);
  const auto diag = lu.matrixLU().diagonal();
  for (Eigen::Index i = 0; i < diag.size(); ++i) {
    if (diag(i) == 0.0) {
      return absl::FailedPreconditionError("singular matrix");
    }
  }
  return Eigen::MatrixXd(lu.solve(b));
}

Matrix Rows(const Matrix& x, const std::vector<int>& rows) {
  Matrix out(static_cast<Eigen::Index>(rows.size()), x.cols());
  for (size_t i = 0; i < rows.size(); ++i) out.row(i) = x.row(rows[i]);
  return out;
}

Matrix StandardiseWith(const Matrix& x, const Eigen::RowVectorXd& mean,
                       const Eigen::RowVectorXd& scale) {
  Matrix out(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    out.row(i) = (x.row(i) - mean).cwiseQuotient(scale);
  }
  return out;
}

absl::StatusOr<LinearSolution> Solve(const std::string& kind, const Matrix& x,
                                     const std::vector<int>& y, int k,
                                     const nlohmann::ordered_json& params) {
  if (kind == "lda") {
    return SolveLda(x, y, k, params.value("shrinkage", 0.6));
  }
  if (kind == "ridge") {
    return SolveRidge(x, y, k, params.value("lam", 1.0));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown head kind '", kind, "' (this implementation fits lda, ridge)"));
}

Matrix ApplySolution(const Matrix& z, const LinearSolution& s) {
  Matrix out = z * s.w;
  for (Eigen::Index i = 0; i < out.rows(); ++i) {
    for (Eigen::Index j = 0; j < out.cols(); ++j) out(i, j) += s.b[j];
  }
  return out;
}

}  // namespace

void Standardise(const Matrix& x, Eigen::RowVectorXd* mean,
                 Eigen::RowVectorXd* scale) {
  *mean = ColumnMeans(x);
  Eigen::RowVectorXd var = Eigen::RowVectorXd::Zero(x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const Eigen::RowVectorXd dev = x.row(i) - *mean;
    var += dev.cwiseProduct(dev);
  }
  var /= static_cast<double>(x.rows());
  *scale = var.cwiseSqrt().array() + 1e-6;
}

absl::StatusOr<LinearSolution> SolveLda(const Matrix& x,
                                        const std::vector<int>& y, int k,
                                        double shrinkage) {
  const Eigen::Index n = x.rows();
  const Eigen::Index d = x.cols();
  Matrix means(k, d);
  const Eigen::RowVectorXd overall = ColumnMeans(x);
  std::vector<int> counts(k, 0);
  for (int c = 0; c < k; ++c) {
    std::vector<int> rows;
    for (Eigen::Index i = 0; i < n; ++i) {
      if (y[i] == c) rows.push_back(static_cast<int>(i));
    }
    counts[c] = static_cast<int>(rows.size());
    means.row(c) = rows.empty() ? overall : ColumnMeans(Rows(x, rows));
  }
  Matrix r(n, d);
  for (Eigen::Index i = 0; i < n; ++i) r.row(i) = x.row(i) - means.row(y[i]);
  Matrix r2 = r.cwiseProduct(r);
  const double denom = static_cast<double>(std::max<Eigen::Index>(1, n - 1));
  const double tau =
      PairwiseSum(r2.data(), r2.size()) / denom / static_cast<double>(d);
  const double a = std::clamp(shrinkage, 1e-3, 1.0);
  const Eigen::MatrixXd m = means.transpose();  // [d, K]
  LinearSolution out;
  if (a >= 1.0) {
    out.w = m / (a * tau);
  } else {
    const double c = (1.0 - a) / denom;
    const Eigen::MatrixXd rm = r * m;  // [n, K]
    Eigen::MatrixXd inner = c * (r * r.transpose());
    inner.diagonal().array() += a * tau;
    ASSIGN_OR_RETURN(const Eigen::MatrixXd solved, Solve(inner, rm));
    out.w = (m - (c * r.transpose()) * solved) / (a * tau);
  }
  double total = 0.0;
  std::vector<double> prior(k);
  for (int c = 0; c < k; ++c) prior[c] = std::max(1, counts[c]);
  total = PairwiseSum(prior);
  out.b.resize(k);
  for (int c = 0; c < k; ++c) {
    out.b[c] = -0.5 * means.row(c).dot(out.w.col(c).transpose()) +
               std::log(prior[c] / total);
  }
  return out;
}

absl::StatusOr<LinearSolution> SolveRidge(const Matrix& x,
                                          const std::vector<int>& y, int k,
                                          double lam) {
  const Eigen::Index n = x.rows();
  Matrix onehot = Matrix::Zero(n, k);
  for (Eigen::Index i = 0; i < n; ++i) onehot(i, y[i]) = 1.0;
  const Eigen::RowVectorXd xm = ColumnMeans(x);
  const Eigen::RowVectorXd ym = ColumnMeans(onehot);
  Matrix xc = x.rowwise() - xm;
  Matrix yc = onehot.rowwise() - ym;
  Eigen::MatrixXd a = xc * xc.transpose();
  a.diagonal().array() += lam;
  ASSIGN_OR_RETURN(const Eigen::MatrixXd solved, Solve(a, Eigen::MatrixXd(yc)));
  LinearSolution out;
  out.w = xc.transpose() * solved;
  const Eigen::RowVectorXd bias = ym - xm * out.w;
  out.b.assign(bias.data(), bias.data() + bias.size());
  return out;
}

std::vector<std::vector<int>> Folds(int n, int k, uint32_t seed) {
  LegacyRandomState rng(seed);
  const std::vector<int> perm = rng.Permutation(n);
  const int parts = std::min(k, n);
  std::vector<std::vector<int>> folds;
  // np.array_split: the first n % parts parts get one extra item.
  int at = 0;
  for (int p = 0; p < parts; ++p) {
    const int size = n / parts + (p < n % parts ? 1 : 0);
    std::vector<int> fold(perm.begin() + at, perm.begin() + at + size);
    std::sort(fold.begin(), fold.end());
    folds.push_back(std::move(fold));
    at += size;
  }
  return folds;
}

std::vector<nlohmann::ordered_json> DefaultGrid(const std::string& kind) {
  std::vector<nlohmann::ordered_json> grid;
  if (kind == "lda") {
    for (double a : {0.3, 0.6, 0.9}) grid.push_back({{"shrinkage", a}});
  } else if (kind == "ridge") {
    for (double lam : {0.1, 1.0, 10.0, 100.0}) grid.push_back({{"lam", lam}});
  }
  return grid;
}

std::vector<int> DefaultCandidateBlocks(int n_blocks) {
  std::set<int> out;
  for (double f : {0.5, 0.6, 0.7, 0.85, 1.0}) {
    out.insert(std::max(1, static_cast<int>(std::nearbyint(
                               f * static_cast<double>(n_blocks)))));
  }
  return std::vector<int>(out.begin(), out.end());
}

// BestHeadOfKind's steps: out-of-fold scores for each configuration, their
// judgement, the search, and the winner's refit.
namespace {

// A linear solution with the standardisation it was fitted under.
struct StandardisedFit {
  Eigen::RowVectorXd mean;
  Eigen::RowVectorXd scale;
  LinearSolution solution;
};

// Standardises X on its own rows, then solves `kind` on them.
absl::StatusOr<StandardisedFit> FitStandardised(
    const std::string& kind, const Matrix& x, const std::vector<int>& y, int k,
    const nlohmann::ordered_json& params) {
  StandardisedFit fit;
  Standardise(x, &fit.mean, &fit.scale);
  ASSIGN_OR_RETURN(
      fit.solution,
      Solve(kind, StandardiseWith(x, fit.mean, fit.scale), y, k, params));
  return fit;
}

// The rows of [0, n) outside `fold` (sorted), in order.
std::vector<int> RowsOutside(const std::vector<int>& fold, int n) {
  std::vector<int> rows;
  size_t f = 0;
  for (int i = 0; i < n; ++i) {
    if (f < fold.size() && fold[f] == i) {
      ++f;
    } else {
      rows.push_back(i);
    }
  }
  return rows;
}

// Every row's scores [n, K] from the configuration fitted on the other
// folds. FAILED_PRECONDITION when a fold's system is singular.
absl::StatusOr<Matrix> OutOfFoldScores(
    const std::string& kind, const Matrix& x, const std::vector<int>& labels,
    int k, const nlohmann::ordered_json& params,
    const std::vector<std::vector<int>>& folds) {
  const int n = static_cast<int>(labels.size());
  Matrix oof = Matrix::Zero(n, k);
  for (const std::vector<int>& fold : folds) {
    const std::vector<int> train = RowsOutside(fold, n);
    std::vector<int> y_train;
    for (int i : train) y_train.push_back(labels[i]);
    ASSIGN_OR_RETURN(const StandardisedFit fit,
                     FitStandardised(kind, Rows(x, train), y_train, k, params));
    const Matrix scores = ApplySolution(
        StandardiseWith(Rows(x, fold), fit.mean, fit.scale), fit.solution);
    for (size_t i = 0; i < fold.size(); ++i) oof.row(fold[i]) = scores.row(i);
  }
  return oof;
}

// One layer and grid entry as judged out of fold: the NLL after the
// temperature fitted on the softmaxed scores, the argmax accuracy, and that
// temperature (which the refit head keeps).
struct Candidate {
  int layer;
  nlohmann::ordered_json params;
  double nll;
  double acc;
  double temperature;
};

Candidate JudgeOutOfFold(const Matrix& oof, const std::vector<int>& labels,
                         int k, int layer,
                         const nlohmann::ordered_json& params) {
  const Matrix soft = RowSoftmax(oof);
  const TemperatureScaler scaler = TemperatureScaler::Fit(soft, labels);
  const Matrix p = scaler.Apply(soft);
  std::vector<double> logs;
  std::vector<double> hits;
  for (int i = 0; i < static_cast<int>(labels.size()); ++i) {
    logs.push_back(std::log(std::max(p(i, labels[i]), 1e-12)));
    hits.push_back(ArgMax(&oof(i, 0), k) == labels[i] ? 1.0 : 0.0);
  }
  return Candidate{layer, params, -Mean(logs), Mean(hits), scaler.temperature};
}

// Every layer with every grid entry, in order: the lowest out-of-fold NLL,
// the earlier on ties. A configuration whose system is singular is skipped.
absl::StatusOr<Candidate> BestCandidate(
    const std::vector<Matrix>& features, const std::vector<int>& labels, int k,
    const std::string& kind, const std::vector<std::vector<int>>& folds) {
  const std::vector<nlohmann::ordered_json> grid = DefaultGrid(kind);
  std::optional<Candidate> best;
  for (size_t layer = 0; layer < features.size(); ++layer) {
    for (const nlohmann::ordered_json& params : grid) {
      const absl::StatusOr<Matrix> oof =
          OutOfFoldScores(kind, features[layer], labels, k, params, folds);
      if (absl::IsFailedPrecondition(oof.status())) continue;
      RETURN_IF_ERROR(oof.status());
      Candidate candidate =
          JudgeOutOfFold(*oof, labels, k, static_cast<int>(layer), params);
      if (!best.has_value() || candidate.nll < best->nll) {
        best = std::move(candidate);
      }
    }
  }
  if (!best.has_value()) {
    return absl::FailedPreconditionError(
        "every head configuration failed to solve");
  }
  return *std::move(best);
}

// The winner fitted on every row of its layer, keeping its out-of-fold
// temperature and scores.
absl::StatusOr<LinearHead> Refit(const Matrix& x,
                                 const std::vector<int>& labels, int k,
                                 const std::string& kind,
                                 const Candidate& best) {
  ASSIGN_OR_RETURN(StandardisedFit fit,
                   FitStandardised(kind, x, labels, k, best.params));
  LinearHead head;
  head.kind = kind;
  head.layer = best.layer;
  head.mean = std::move(fit.mean);
  head.scale = std::move(fit.scale);
  head.w = std::move(fit.solution.w);
  head.b = std::move(fit.solution.b);
  head.temperature = best.temperature;
  head.params = best.params;
  head.n_calib = static_cast<int>(labels.size());
  head.cv = {{"oof_nll", best.nll}, {"oof_acc", best.acc}};
  return head;
}

}  // namespace

absl::StatusOr<LinearHead> BestHeadOfKind(const std::vector<Matrix>& features,
                                          const std::vector<int>& labels, int k,
                                          const std::string& kind, int n_folds,
                                          uint32_t seed) {
  const int n = static_cast<int>(labels.size());
  if (n < 2 * k || n < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need at least max(8, 2K) labelled examples for a head, got ", n,
        " for K=", k));
  }
  if (kind != "lda" && kind != "ridge") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown head kind '", kind, "' (lda or ridge)"));
  }
  ASSIGN_OR_RETURN(
      const Candidate best,
      BestCandidate(features, labels, k, kind, Folds(n, n_folds, seed)));
  return Refit(features[best.layer], labels, k, kind, best);
}

}  // namespace mesa_anyjev::decision
