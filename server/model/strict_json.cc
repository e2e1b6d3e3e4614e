// A SAX pass finds duplicate keys and excessive nesting before the DOM is
// built: nlohmann's DOM parser would already have dropped the first of two
// duplicates by the time a caller could look.
#include "server/model/strict_json.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mesa_anyjev::model {
namespace {

using json = nlohmann::json;

// Checks structure only; values are dropped. Returning false stops the
// parser at once, so a 100 MB header of nested '[' costs one pass.
class StrictSax : public nlohmann::json_sax<json> {
 public:
  explicit StrictSax(int max_depth) : max_depth_(max_depth) {}

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*raw*/) override {
    return true;
  }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }

  bool start_object(std::size_t /*elements*/) override {
    if (!Enter()) {
      return false;
    }
    keys_.emplace_back();
    is_object_.push_back(true);
    return true;
  }
  bool key(string_t& val) override {
    if (!keys_.back().insert(val).second) {
      error_ = absl::StrCat("duplicate key '", Printable(val), "'");
      return false;
    }
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    is_object_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    if (!Enter()) {
      return false;
    }
    is_object_.push_back(false);
    return true;
  }
  bool end_array() override {
    is_object_.pop_back();
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
    if (static_cast<int>(is_object_.size()) >= max_depth_) {
      error_ = absl::StrCat("nesting deeper than ", max_depth_, " levels");
      return false;
    }
    return true;
  }

  const int max_depth_;
  std::vector<absl::flat_hash_set<std::string>> keys_;  // one per open object
  std::vector<bool> is_object_;                         // one per open level
  std::string error_;
};

// Length of the well-formed UTF-8 sequence at the start of `text` (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), 0 if there is
// none. `text` is not empty.
size_t Utf8SequenceLength(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char lead = bytes[0];
  if (lead < 0x80) {
    return 1;
  }
  size_t len = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    len = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF in lead position
  }
  if (text.size() < len) {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    const unsigned char b = bytes[k];
    if ((b & 0xC0) != 0x80) {
      return 0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;  // overlong, out of range, or a UTF-16 surrogate
  }
  return len;
}

}  // namespace

std::optional<size_t> FirstInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = Utf8SequenceLength(text.substr(i));
    if (len == 0) {
      return i;
    }
    i += len;
  }
  return std::nullopt;
}

std::string Printable(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const bool truncated = text.size() > max_bytes;
  // A sequence cut here is escaped below like any other broken one.
  text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size() + 3);
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = Utf8SequenceLength(text.substr(i));
    const auto byte = static_cast<unsigned char>(text[i]);
    if (len == 0 || byte < 0x20 || byte == 0x7F) {
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  if (truncated) {
    out += "...";
  }
  return out;
}

absl::StatusOr<json> ParseStrictJson(std::string_view text, int max_depth) {
  if (const auto bad = FirstInvalidUtf8(text); bad.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not valid UTF-8 (byte ", *bad, ")"));
  }
  // Both passes run on validated input, but nlohmann reports some problems
  // by exception; none may escape a loader.
  try {
    StrictSax sax(max_depth);
    if (!json::sax_parse(text.begin(), text.end(), &sax)) {
      return absl::InvalidArgumentError(sax.error());
    }
    json value = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                             /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      return absl::InvalidArgumentError("not valid JSON");
    }
    return value;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("not valid JSON: ", Printable(e.what(), 512)));
  }
}

}  // namespace mesa_anyjev::model
