// Linear heads and their array encoding (see linear_head.h).
#include "common/decision/linear_head.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/json_numbers.h"
#include "common/text/utf8.h"

namespace mesa_anyjev::decision {
namespace {

static_assert(std::endian::native == std::endian::little,
              "heads files store little-endian floats");

void FlattenList(const nlohmann::ordered_json& json, size_t depth,
                 std::vector<int64_t>* shape, std::vector<double>* values,
                 absl::Status* status) {
  if (!status->ok()) return;
  if (json.is_number()) {
    if (depth != shape->size()) {
      *status = absl::InvalidArgumentError("array: ragged nested list");
      return;
    }
    values->push_back(json.get<double>());
    return;
  }
  if (!json.is_array()) {
    *status = absl::InvalidArgumentError(
        "array: expected a number, a list or {dtype, shape, b64}");
    return;
  }
  if (depth == shape->size()) {
    if (!values->empty()) {
      *status = absl::InvalidArgumentError("array: ragged nested list");
      return;
    }
    shape->push_back(static_cast<int64_t>(json.size()));
  } else if ((*shape)[depth] != static_cast<int64_t>(json.size())) {
    *status = absl::InvalidArgumentError("array: ragged nested list");
    return;
  }
  for (const auto& item : json) {
    FlattenList(item, depth + 1, shape, values, status);
  }
}

absl::StatusOr<Eigen::RowVectorXd> DecodeVector(
    const nlohmann::ordered_json& json, const char* name) {
  if (!json.contains(name)) {
    return absl::InvalidArgumentError(absl::StrCat("head: no \"", name, "\""));
  }
  auto array = DecodeArray(json[name]);
  if (!array.ok() || array->shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head: \"", name, "\" must be a 1-D array", array.ok() ? "" : ": ",
        array.ok() ? "" : array.status().message()));
  }
  return Eigen::Map<const Eigen::RowVectorXd>(
      array->values.data(), static_cast<Eigen::Index>(array->values.size()));
}

}  // namespace

nlohmann::ordered_json EncodeArray(const std::vector<double>& values,
                                   const std::vector<int64_t>& shape) {
  std::string bytes(values.size() * sizeof(float), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    std::memcpy(bytes.data() + i * sizeof(float), &f, sizeof(float));
  }
  nlohmann::ordered_json out;
  out["dtype"] = "float32";
  out["shape"] = shape;
  out["b64"] = absl::Base64Escape(bytes);
  return out;
}

absl::StatusOr<DecodedArray> DecodeArray(const nlohmann::ordered_json& json) {
  DecodedArray out;
  if (json.is_object() && json.contains("b64")) {
    try {
      const std::string dtype = json.value("dtype", std::string("float32"));
      std::string bytes;
      if (!json["b64"].is_string() ||
          !absl::Base64Unescape(json["b64"].get<std::string>(), &bytes)) {
        return absl::InvalidArgumentError("array: \"b64\" is not base64");
      }
      if (!json.contains("shape") || !json["shape"].is_array()) {
        return absl::InvalidArgumentError("array: no \"shape\" list");
      }
      const size_t width = dtype == "float32"   ? sizeof(float)
                           : dtype == "float64" ? sizeof(double)
                                                : 0;
      if (width == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("array: dtype '", text::Printable(dtype, 32),
                         "' (expected float32 or float64)"));
      }
      // The payload bounds the count, so no product of dims can overflow.
      const auto max_count = static_cast<int64_t>(bytes.size() / width);
      int64_t count = 1;
      for (const auto& dim : json["shape"]) {
        if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
          return absl::InvalidArgumentError(
              "array: \"shape\" must be a list of non-negative integers");
        }
        out.shape.push_back(dim.get<int64_t>());
        if (out.shape.back() != 0 && count > max_count / out.shape.back()) {
          return absl::InvalidArgumentError(
              absl::StrCat("array: shape holds more values than the ",
                           bytes.size(), " bytes of \"b64\""));
        }
        count *= out.shape.back();
      }
      if (bytes.size() != static_cast<size_t>(count) * width) {
        return absl::InvalidArgumentError(absl::StrCat(
            "array: ", bytes.size(), " bytes do not hold shape of ", count, " ",
            dtype, " values"));
      }
      out.values.resize(count);
      for (int64_t i = 0; i < count; ++i) {
        if (width == sizeof(float)) {
          float f;
          std::memcpy(&f, bytes.data() + i * width, width);
          out.values[i] = f;
        } else {
          std::memcpy(&out.values[i], bytes.data() + i * width, width);
        }
      }
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("array: malformed: ", e.what()));
    }
    return out;
  }
  absl::Status status;
  FlattenList(json, 0, &out.shape, &out.values, &status);
  RETURN_IF_ERROR(status);
  return out;
}

Matrix LinearHead::Scores(const Matrix& x) const {
  Matrix z(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    z.row(i) = (x.row(i) - mean).cwiseQuotient(scale);
  }
  Matrix s = z * w;
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    for (Eigen::Index j = 0; j < s.cols(); ++j) s(i, j) += b[j];
  }
  return s;
}

Matrix LinearHead::Probs(const Matrix& x) const {
  Matrix s = Scores(x);
  for (Eigen::Index i = 0; i < s.size(); ++i) s.data()[i] /= temperature;
  return RowSoftmax(s);
}

nlohmann::ordered_json LinearHead::ToJson() const {
  nlohmann::ordered_json out;
  out["method"] = absl::StrCat("head:", kind);
  out["layer"] = layer;
  out["temperature"] = temperature;
  out["params"] = params;
  out["n_calib"] = n_calib;
  out["cv"] = cv;
  out["W"] = EncodeArray(std::vector<double>(w.data(), w.data() + w.size()),
                         {w.rows(), w.cols()});
  nlohmann::ordered_json bias = nlohmann::ordered_json::array();
  for (double x : b) bias.push_back(static_cast<double>(static_cast<float>(x)));
  out["b"] = std::move(bias);
  out["mean"] =
      EncodeArray(std::vector<double>(mean.data(), mean.data() + mean.size()),
                  {mean.size()});
  out["scale"] = EncodeArray(
      std::vector<double>(scale.data(), scale.data() + scale.size()),
      {scale.size()});
  return out;
}

absl::StatusOr<LinearHead> LinearHead::FromJson(
    const nlohmann::ordered_json& json) {
  LinearHead head;
  try {
    if (!json.is_object()) {
      return absl::InvalidArgumentError("head: must be an object");
    }
    const std::string method = json.value("method", std::string());
    if (method.rfind("head:", 0) != 0 || method.size() <= 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("head: method '", method, "' is not head:<kind>"));
    }
    head.kind = method.substr(5);
    ASSIGN_OR_RETURN(head.layer, text::JsonIntegerOr(json, "layer", 0,
                                                     INT32_MIN, INT32_MAX));
    if (!json.contains("temperature") || !json["temperature"].is_number()) {
      return absl::InvalidArgumentError("head: no numeric \"temperature\"");
    }
    head.temperature = json["temperature"].get<double>();
    if (json.contains("params") && json["params"].is_object()) {
      head.params = json["params"];
    }
    ASSIGN_OR_RETURN(head.n_calib,
                     text::JsonIntegerOr(json, "n_calib", 0, 0, INT32_MAX));
    if (json.contains("cv") && json["cv"].is_object()) head.cv = json["cv"];
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("head: malformed field: ", e.what()));
  }
  if (!json.contains("W")) {
    return absl::InvalidArgumentError("head: no \"W\"");
  }
  ASSIGN_OR_RETURN(const DecodedArray w, DecodeArray(json["W"]));
  if (w.shape.size() != 2) {
    return absl::InvalidArgumentError("head: \"W\" must be a [d, K] array");
  }
  head.w = Eigen::Map<const Matrix>(w.values.data(), w.shape[0], w.shape[1]);
  if (!json.contains("b")) {
    return absl::InvalidArgumentError("head: no \"b\"");
  }
  ASSIGN_OR_RETURN(const DecodedArray b, DecodeArray(json["b"]));
  head.b = b.values;
  ASSIGN_OR_RETURN(head.mean, DecodeVector(json, "mean"));
  ASSIGN_OR_RETURN(head.scale, DecodeVector(json, "scale"));
  const Eigen::Index d = head.w.rows();
  if (static_cast<Eigen::Index>(head.b.size()) != head.w.cols() ||
      head.mean.size() != d || head.scale.size() != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("head: shapes disagree: W [", d, ", ", head.w.cols(),
                     "], b [", head.b.size(), "], mean [", head.mean.size(),
                     "], scale [", head.scale.size(), "]"));
  }
  if (!(head.temperature > 0.0) || !std::isfinite(head.temperature)) {
    return absl::InvalidArgumentError(
        "head: temperature must be positive and finite");
  }
  if (!head.w.allFinite() || !head.mean.allFinite() ||
      !head.scale.allFinite() ||
      !std::all_of(head.b.begin(), head.b.end(),
                   [](double x) { return std::isfinite(x); })) {
    return absl::InvalidArgumentError(
        "head: W, b, mean and scale must hold finite values");
  }
  if ((head.scale.array() == 0.0).any()) {
    return absl::InvalidArgumentError("head: \"scale\" holds a zero");
  }
  if (head.w.cols() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head: W [", d, ", ", head.w.cols(), "] must have K >= 2 columns"));
  }
  return head;
}

}  // namespace mesa_anyjev::decision
