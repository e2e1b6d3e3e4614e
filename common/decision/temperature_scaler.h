// L1: one temperature per question (docs/decision.md, L1: temperature;
// anyjev calibrate/posthoc.py). Fit by golden-section search over log T in
// [-3, 3] minimising the mean NLL of softmax(log(clip(p, 1e-12)) / T) at the
// gold labels; the L0 prior the calibration set was scored with is frozen
// beside it, so L1 decisions are a pure function of the calibration set.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/numpy_ops.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

class TemperatureScaler {
 public:
  // probs [N, K], labels in [0, K). 60 iterations, phi = (sqrt 5 - 1) / 2;
  // ties raise the lower end; T = exp((a + b) / 2) of the last bracket.
  static TemperatureScaler Fit(const Matrix& probs,
                               const std::vector<int>& labels,
                               double log_t_lo = -3.0, double log_t_hi = 3.0,
                               int iters = 60);

  // softmax(log(clip(p, 1e-12)) / T), row-wise; never moves the argmax.
  Matrix Apply(const Matrix& probs) const;
  std::vector<double> Apply(const std::vector<double>& probs) const;

  // {"method": "temperature", "temperature", "prior_method",
  //  "prior_strength", "n_calib"[, "prior": P x K rounded to 8 decimals]}.
  nlohmann::ordered_json ToJson() const;
  // Reads the keys above (a missing prior, method or count takes the
  // reference's default); INVALID_ARGUMENT naming a malformed field.
  static absl::StatusOr<TemperatureScaler> FromJson(
      const nlohmann::ordered_json& json);

  double temperature = 1.0;
  std::optional<Matrix> prior;  // [P, K] frozen at calibration
  double prior_strength = 0.0;
  std::string prior_method = "none";
  int n_calib = 0;
};

// -mean log_softmax(logits)[i, labels[i]] (numpy order).
double MeanNll(const Matrix& logits, const std::vector<int>& labels);

}  // namespace mesa_anyjev::decision
