// An L2 head (docs/decision.md, L2: heads; anyjev heads.py LinearHead): scores
// = ((h - mean) / scale) W + b on the hidden state h after one block, and
// probabilities softmax(scores / T). Its JSON form is the heads-file entry
// body: method "head:<kind>", arrays W [d, K], mean [d] and scale [d] as base64
// float32 ({"dtype", "shape", "b64"}), b as a plain list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/numpy_ops.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

// A decoded array: its shape and row-major values.
struct DecodedArray {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// {"dtype": "float32", "shape": [...], "b64": ...}: values cast to float32,
// little-endian, row-major, standard base64 (anyjev's encode_array, which
// also stores float64 statistics this way).
nlohmann::ordered_json EncodeArray(const std::vector<double>& values,
                                   const std::vector<int64_t>& shape);
// The inverse; also reads "float64" payloads and plain (nested) number
// lists. INVALID_ARGUMENT names what is malformed.
absl::StatusOr<DecodedArray> DecodeArray(const nlohmann::ordered_json& json);

class LinearHead {
 public:
  // X [N, d] -> scores [N, K].
  Matrix Scores(const Matrix& x) const;
  // X [N, d] -> probabilities [N, K].
  Matrix Probs(const Matrix& x) const;

  // The head's own keys (method, layer, temperature, params, n_calib, cv,
  // W, b, mean, scale), compact arrays.
  nlohmann::ordered_json ToJson() const;
  static absl::StatusOr<LinearHead> FromJson(
      const nlohmann::ordered_json& json);

  std::string kind;         // "lda", "ridge" (any kind reads the same way)
  int layer = 0;            // position in the candidate list it was chosen from
  Matrix w;                 // [d, K]
  std::vector<double> b;    // [K]
  Eigen::RowVectorXd mean;  // [d]
  Eigen::RowVectorXd scale;  // [d]
  double temperature = 1.0;
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  int n_calib = 0;
  nlohmann::ordered_json cv = nlohmann::ordered_json::object();
};

}  // namespace mesa_anyjev::decision
