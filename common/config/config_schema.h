// The configuration schema: one entry per Config field (its key, type and
// accessor), and parsing and formatting values by declared type. Shared by
// the loader (config_loader.cc) and the validator (config_validator.cc);
// not for use outside common/config.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/config/config.h"

namespace mesa_anyjev::config::schema {

enum class FieldType { kString, kInt32, kInt64, kDouble, kBool, kEnum };

template <typename T>
using Accessor = T& (*)(Config&);

using AnyAccessor =
    std::variant<Accessor<std::string>, Accessor<int32_t>, Accessor<int64_t>,
                 Accessor<double>, Accessor<bool>>;

// Debian's Abseil has its own absl::string_view (not std::string_view), and
// only std's is usable in constant expressions, hence both below.
struct Field {
  std::string_view key_text;  // "section.field"
  FieldType type;
  AnyAccessor access;
  std::span<const char* const> choices;  // kEnum only

  absl::string_view key() const { return {key_text.data(), key_text.size()}; }
  absl::string_view section() const { return key().substr(0, key().find('.')); }
  absl::string_view name() const { return key().substr(key().find('.') + 1); }
};

// Every field, sections in struct order (ToYaml writes them in this order).
std::span<const Field> Fields();
const Field* FindField(absl::string_view key);
bool IsSection(absl::string_view section);

// For error messages: single quotes, C escapes for anything unprintable.
std::string Quote(absl::string_view text);
std::string KnownSections();
std::string KnownFieldsOf(absl::string_view section);
std::string UnknownKeyHint(absl::string_view key, absl::string_view where);
absl::Status UnknownKeyError(absl::string_view origin, absl::string_view key,
                             absl::string_view where);

// Shortest text that parses back to exactly `value` (".0" on whole numbers).
std::string FormatDouble(double value);
template <typename Int>
absl::StatusOr<Int> ParseInt(absl::string_view text) {
  Int value{};
  const char* const end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(text), " is out of range [", std::numeric_limits<Int>::min(),
        ", ", std::numeric_limits<Int>::max(), "]"));
  }
  if (ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is not an integer"));
  }
  return value;
}
absl::StatusOr<double> ParseDouble(absl::string_view text);
absl::StatusOr<bool> ParseBool(absl::string_view text);
// Parses `text` by the field's declared type into `config`.
absl::Status SetField(const Field& field, absl::string_view text,
                      Config* config);
// A YAML double-quoted scalar, exact for any valid UTF-8.
std::string YamlQuote(absl::string_view text);
// The field's value in `config` as YAML text.
std::string FormatValue(const Field& field, Config* config);

}  // namespace mesa_anyjev::config::schema
