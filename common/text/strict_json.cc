// A SAX pass finds duplicate keys and excessive nesting before the DOM is
// built: nlohmann's DOM parser would already have dropped the first of two
// duplicates by the time a caller could look. Both of nlohmann's parsers are
// iterative, so neither pass recurses per level.
#include "common/text/strict_json.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"

namespace mesa_anyjev::text {
namespace {

// Checks structure only; values are dropped. Returning false stops the
// parser at once, so a 100 MB text of nested '[' costs one pass.
template <typename BasicJson>
class StrictSax : public nlohmann::json_sax<BasicJson> {
  using Base = nlohmann::json_sax<BasicJson>;

 public:
  explicit StrictSax(int max_depth) : max_depth_(max_depth) {}

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(typename Base::number_integer_t /*val*/) override {
    return true;
  }
  bool number_unsigned(typename Base::number_unsigned_t /*val*/) override {
    return true;
  }
  bool number_float(typename Base::number_float_t /*val*/,
                    const typename Base::string_t& /*raw*/) override {
    return true;
  }
  bool string(typename Base::string_t& /*val*/) override { return true; }
  bool binary(typename Base::binary_t& /*val*/) override { return true; }

  bool start_object(std::size_t /*elements*/) override {
    if (!Enter()) return false;
    keys_.emplace_back();
    return true;
  }
  bool key(typename Base::string_t& val) override {
    if (!keys_.back().insert(val).second) {
      error_ = absl::StrCat("duplicate key '", Printable(val), "'");
      return false;
    }
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*elements*/) override { return Enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) override {
    // nlohmann quotes the bytes it last read, which can end inside a UTF-8
    // sequence.
    error_ = absl::StrCat("not valid JSON: ", Printable(ex.what(), 512));
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Enter() {
    if (depth_ >= max_depth_) {
      error_ = absl::StrCat("nested deeper than ", max_depth_,
                            " levels (the JSON depth limit)");
      return false;
    }
    ++depth_;
    return true;
  }

  const int max_depth_;
  int depth_ = 0;
  std::vector<absl::flat_hash_set<std::string>> keys_;  // one per open object
  std::string error_;
};

template <typename BasicJson>
absl::StatusOr<BasicJson> Parse(std::string_view text,
                                const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(text.size(), " bytes exceed ", limits.max_bytes_name, "=",
                     limits.max_bytes));
  }
  if (const int64_t bad = FirstInvalidUtf8(text); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid UTF-8 at byte offset ", bad));
  }
  // Both passes run on validated input, but nlohmann reports some problems
  // by exception; none may escape.
  try {
    StrictSax<BasicJson> sax(limits.max_depth);
    if (!BasicJson::sax_parse(text.begin(), text.end(), &sax)) {
      return absl::InvalidArgumentError(sax.error());
    }
    BasicJson value = BasicJson::parse(text.begin(), text.end(),
                                       /*cb=*/nullptr,
                                       /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      return absl::InvalidArgumentError("not valid JSON");
    }
    return value;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("not valid JSON: ", Printable(e.what(), 512)));
  }
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseStrictJson(std::string_view text,
                                               const JsonLimits& limits) {
  return Parse<nlohmann::json>(text, limits);
}

absl::StatusOr<nlohmann::ordered_json> ParseStrictOrderedJson(
    std::string_view text, const JsonLimits& limits) {
  return Parse<nlohmann::ordered_json>(text, limits);
}

}  // namespace mesa_anyjev::text
