// Python json.dumps layouts (see py_json.h).
#include "common/decision/py_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/py_format.h"

namespace mesa_anyjev::decision {
namespace {

using Json = nlohmann::ordered_json;

class Dumper {
 public:
  Dumper(const PyJsonOptions& options, size_t max_bytes)
      : options_(options), max_bytes_(max_bytes) {
    item_separator_ = options.compact || options.indent ? "," : ", ";
    key_separator_ = options.compact ? ":" : ": ";
  }

  // Recursion is bounded by the parser's depth limit (strict_json.h).
  void Dump(const Json& value, int depth, std::string* out) const {
    if (out->size() > max_bytes_) return;  // the caller sees it and refuses
    switch (value.type()) {
      case Json::value_t::object:
        DumpObject(value, depth, out);
        return;
      case Json::value_t::array:
        DumpArray(value, depth, out);
        return;
      case Json::value_t::string:
        out->append(PyJsonString(value.get_ref<const std::string&>()));
        return;
      case Json::value_t::boolean:
        out->append(value.get<bool>() ? "true" : "false");
        return;
      case Json::value_t::number_integer:
        absl::StrAppend(out, value.get<int64_t>());
        return;
      case Json::value_t::number_unsigned:
        absl::StrAppend(out, value.get<uint64_t>());
        return;
      case Json::value_t::number_float: {
        const double x = value.get<double>();
        if (std::isnan(x)) {
          out->append("NaN");
        } else if (std::isinf(x)) {
          out->append(x > 0 ? "Infinity" : "-Infinity");
        } else {
          out->append(PyFloatRepr(x));
        }
        return;
      }
      default:  // null, and discarded/binary values, which we never build
        out->append("null");
        return;
    }
  }

 private:
  // Before the item at `depth`: a newline and its indent, when indenting.
  void Break(int depth, std::string* out) const {
    if (!options_.indent) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(*options_.indent * depth), ' ');
  }

  void DumpObject(const Json& value, int depth, std::string* out) const {
    if (value.empty()) {
      out->append("{}");
      return;
    }
    std::vector<std::pair<std::string_view, const Json*>> items;
    for (const auto& [key, item] : value.items()) {
      items.emplace_back(key, &item);
    }
    if (options_.sort_keys) {
      // Byte order of UTF-8 is code point order, which is how Python sorts.
      std::stable_sort(
          items.begin(), items.end(),
          [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out->push_back('{');
    bool first = true;
    for (const auto& [key, item] : items) {
      if (out->size() > max_bytes_) return;
      if (!first) out->append(item_separator_);
      first = false;
      Break(depth + 1, out);
      absl::StrAppend(out, PyJsonString(key), key_separator_);
      Dump(*item, depth + 1, out);
    }
    Break(depth, out);
    out->push_back('}');
  }

  void DumpArray(const Json& value, int depth, std::string* out) const {
    if (value.empty()) {
      out->append("[]");
      return;
    }
    out->push_back('[');
    bool first = true;
    for (const Json& item : value) {
      if (out->size() > max_bytes_) return;
      if (!first) out->append(item_separator_);
      first = false;
      Break(depth + 1, out);
      Dump(item, depth + 1, out);
    }
    Break(depth, out);
    out->push_back(']');
  }

  const PyJsonOptions& options_;
  const size_t max_bytes_;
  std::string item_separator_;
  std::string key_separator_;
};

}  // namespace

std::string PyJsonDumps(const nlohmann::ordered_json& value,
                        const PyJsonOptions& options) {
  std::string out;
  Dumper(options, std::numeric_limits<size_t>::max()).Dump(value, 0, &out);
  return out;
}

std::string PyJsonCanonical(const nlohmann::ordered_json& value) {
  return PyJsonDumps(
      value, PyJsonOptions{
                 .indent = std::nullopt, .sort_keys = true, .compact = true});
}

std::string PyJsonDumpsIndent2(const nlohmann::ordered_json& value) {
  return PyJsonDumps(value, PyJsonOptions{.indent = 2});
}

std::optional<std::string> PyJsonDumpsIndent2(
    const nlohmann::ordered_json& value, size_t max_bytes) {
  const PyJsonOptions options{.indent = 2};
  std::string out;
  Dumper(options, max_bytes).Dump(value, 0, &out);
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

}  // namespace mesa_anyjev::decision
