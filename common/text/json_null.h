// JSON null for a value that is absent: records write a missing field as
// null rather than leaving the key out, so every record has the same keys.
#pragma once

#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace mesa_anyjev::text {

// The value, or null when it has none.
template <typename T>
nlohmann::ordered_json OrNull(const std::optional<T>& value) {
  return value.has_value() ? nlohmann::ordered_json(*value)
                           : nlohmann::ordered_json(nullptr);
}

// The text, or null when it is empty.
inline nlohmann::ordered_json NullIfEmpty(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr)
                      : nlohmann::ordered_json(text);
}

}  // namespace mesa_anyjev::text
