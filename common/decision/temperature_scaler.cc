// Temperature scaling (see temperature_scaler.h).
#include "common/decision/temperature_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"
#include "common/text/json_numbers.h"

namespace mesa_anyjev::decision {
namespace {

constexpr double kEps = 1e-12;

Matrix ClippedLog(const Matrix& probs) {
  Matrix out(probs.rows(), probs.cols());
  for (Eigen::Index i = 0; i < probs.rows(); ++i) {
    for (Eigen::Index j = 0; j < probs.cols(); ++j) {
      out(i, j) = std::log(std::max(probs(i, j), kEps));
    }
  }
  return out;
}

// log_softmax of each row: z - max, then z - log(sum(exp(z))).
Matrix RowLogSoftmax(const Matrix& logits) {
  Matrix z(logits.rows(), logits.cols());
  std::vector<double> e(logits.cols());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const double max = logits.row(i).maxCoeff();
    for (Eigen::Index j = 0; j < logits.cols(); ++j) {
      z(i, j) = logits(i, j) - max;
      e[j] = std::exp(z(i, j));
    }
    const double log_sum = std::log(PairwiseSum(e));
    for (Eigen::Index j = 0; j < logits.cols(); ++j) z(i, j) -= log_sum;
  }
  return z;
}

Matrix Divide(const Matrix& m, double t) {
  Matrix out = m;
  for (Eigen::Index i = 0; i < out.size(); ++i) out.data()[i] /= t;
  return out;
}

}  // namespace

double MeanNll(const Matrix& logits, const std::vector<int>& labels) {
  const Matrix lp = RowLogSoftmax(logits);
  std::vector<double> picked;
  picked.reserve(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    picked.push_back(lp(static_cast<Eigen::Index>(i), labels[i]));
  }
  return -Mean(picked);
}

TemperatureScaler TemperatureScaler::Fit(const Matrix& probs,
                                         const std::vector<int>& labels,
                                         double log_t_lo, double log_t_hi,
                                         int iters) {
  const Matrix logits = ClippedLog(probs);
  const auto f = [&](double u) {
    return MeanNll(Divide(logits, std::exp(u)), labels);
  };
  const double phi = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = log_t_lo;
  double b = log_t_hi;
  double c = b - phi * (b - a);
  double d = a + phi * (b - a);
  double fc = f(c);
  double fd = f(d);
  for (int i = 0; i < iters; ++i) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - phi * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + phi * (b - a);
      fd = f(d);
    }
  }
  TemperatureScaler out;
  out.temperature = std::exp((a + b) / 2.0);
  return out;
}

Matrix TemperatureScaler::Apply(const Matrix& probs) const {
  Matrix lp = RowLogSoftmax(Divide(ClippedLog(probs), temperature));
  for (Eigen::Index i = 0; i < lp.size(); ++i) {
    lp.data()[i] = std::exp(lp.data()[i]);
  }
  return lp;
}

std::vector<double> TemperatureScaler::Apply(
    const std::vector<double>& probs) const {
  Matrix m(1, static_cast<Eigen::Index>(probs.size()));
  for (size_t j = 0; j < probs.size(); ++j) m(0, j) = probs[j];
  const Matrix out = Apply(m);
  return std::vector<double>(out.data(), out.data() + out.size());
}

nlohmann::ordered_json TemperatureScaler::ToJson() const {
  nlohmann::ordered_json out;
  out["method"] = "temperature";
  out["temperature"] = temperature;
  out["prior_method"] = prior_method;
  out["prior_strength"] = prior_strength;
  out["n_calib"] = n_calib;
  if (prior.has_value()) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (Eigen::Index i = 0; i < prior->rows(); ++i) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array();
      for (Eigen::Index j = 0; j < prior->cols(); ++j) {
        row.push_back(NumpyRound((*prior)(i, j), 8));
      }
      rows.push_back(std::move(row));
    }
    out["prior"] = std::move(rows);
  }
  return out;
}

absl::StatusOr<TemperatureScaler> TemperatureScaler::FromJson(
    const nlohmann::ordered_json& json) {
  TemperatureScaler out;
  try {
    if (!json.is_object()) {
      return absl::InvalidArgumentError("an L1 artifact must be an object");
    }
    if (!json.contains("temperature") || !json["temperature"].is_number()) {
      return absl::InvalidArgumentError(
          "an L1 artifact needs a numeric \"temperature\"");
    }
    out.temperature = json["temperature"].get<double>();
    if (!(out.temperature > 0.0) || !std::isfinite(out.temperature)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "L1 artifact: temperature must be positive and finite, got ",
          PyFloatRepr(out.temperature)));
    }
    if (json.contains("prior") && !json["prior"].is_null()) {
      const auto& rows = json["prior"];
      if (!rows.is_array() || rows.empty() || !rows[0].is_array() ||
          rows[0].empty()) {
        return absl::InvalidArgumentError(
            "L1 artifact: \"prior\" must be a non-empty P x K list of lists");
      }
      Matrix prior(rows.size(), rows[0].size());
      for (size_t i = 0; i < rows.size(); ++i) {
        if (!rows[i].is_array() || rows[i].size() != rows[0].size()) {
          return absl::InvalidArgumentError(
              "L1 artifact: \"prior\" rows must all have the same length");
        }
        for (size_t j = 0; j < rows[i].size(); ++j) {
          ASSIGN_OR_RETURN(prior(i, j), text::JsonFinite(rows[i][j], "prior"));
        }
      }
      out.prior = std::move(prior);
    }
    ASSIGN_OR_RETURN(out.prior_strength,
                     text::JsonFiniteOr(json, "prior_strength", 0.0));
    out.prior_method = json.value("prior_method", std::string("none"));
    ASSIGN_OR_RETURN(out.n_calib,
                     text::JsonIntegerOr(json, "n_calib", 0, 0, INT32_MAX));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("L1 artifact: malformed field: ", e.what()));
  }
  return out;
}

}  // namespace mesa_anyjev::decision
