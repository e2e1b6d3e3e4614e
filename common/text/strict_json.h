// The one parser for JSON from outside: requests (State.json,
// artifacts_json, Bundles.Put), heads and bundle files, labels, tokenizer
// and model files. nlohmann::json on its own keeps the last of two duplicate
// keys without a word and has no nesting or size limit; the safetensors spec
// forbids duplicates and other loaders have been fooled by them (two
// parsers reading one file differently), and everything that walks a parsed
// value recursively (dump, our Python-style rendering) is safe only because the
// depth was bounded here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::text {

// Deep enough for every file and state we know of (tokenizer.json nests 6,
// a heads file 5), shallow enough that a recursive walk is harmless.
inline constexpr int kMaxJsonDepth = 64;

// {} bounds the depth only: for text whose size its reader already bounded
// (util::ReadFile, a gRPC message limit).
struct JsonLimits {
  size_t max_bytes = SIZE_MAX;
  const char* max_bytes_name =
      "";  // named in the refusal: "limits.max_text_bytes"
  int max_depth = kMaxJsonDepth;
};

// Parses `text` as exactly one JSON value (surrounding whitespace allowed).
// Refuses, with INVALID_ARGUMENT and a message that needs the caller's
// prefix (the field or file): more than max_bytes, invalid UTF-8, syntax
// errors, a duplicate key in any object (naming it), and arrays or objects
// nested deeper than max_depth.
absl::StatusOr<nlohmann::json> ParseStrictJson(std::string_view text,
                                               const JsonLimits& limits);
absl::StatusOr<nlohmann::ordered_json> ParseStrictOrderedJson(
    std::string_view text, const JsonLimits& limits);

}  // namespace mesa_anyjev::text
