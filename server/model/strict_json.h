// JSON parsing for untrusted model files. nlohmann::json on its own keeps the
// last of two duplicate keys without a word and has no nesting limit; the
// safetensors spec forbids duplicates and other loaders have been fooled by
// them (reliability-anchors.md 3.3), so every model-file header and index
// goes through ParseStrictJson instead of json::parse.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::model {

// Byte offset of the first byte of `text` that is not part of well-formed
// UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF), or nullopt when all of it is.
std::optional<size_t> FirstInvalidUtf8(std::string_view text);

// `text` for an error message or log line: valid UTF-8 is kept, control
// bytes and bytes that are not well-formed UTF-8 become \xNN, and anything
// past `max_bytes` of input becomes "...". Names and values read from a file
// pass through it so a hostile file can neither break a message's encoding,
// forge log lines, nor make a message megabytes long.
std::string Printable(std::string_view text, size_t max_bytes = 256);

// Parses `text` as exactly one JSON value (surrounding whitespace allowed).
// Refuses, with INVALID_ARGUMENT and a message that needs a caller's prefix
// (the file): invalid UTF-8, syntax errors, a duplicate key in any object
// (naming it), and arrays/objects nested deeper than `max_depth`.
absl::StatusOr<nlohmann::json> ParseStrictJson(std::string_view text,
                                               int max_depth);

}  // namespace mesa_anyjev::model
