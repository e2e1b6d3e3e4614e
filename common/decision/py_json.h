// json.dumps as Python writes it, for the identities the question lock,
// decision records and prompts depend on: lock_sha and state_sha256 hash
// json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False),
// questions.lock.json is json.dumps(indent=1, ensure_ascii=False), and a dict
// state renders in a prompt as json.dumps(indent=2, ensure_ascii=False).
// Matching those bytes keeps our lock, hashes and prompts interchangeable
// with the reference.
#pragma once

#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

struct PyJsonOptions {
  // None: one line; N: each item on its own line, indented N spaces per
  // level (Python's item separator is then "," and the key separator ": ").
  std::optional<int> indent;
  bool sort_keys = false;  // by code point, as Python sorts str keys
  bool compact = false;    // separators (",", ":") instead of (", ", ": ")
};

// Strings as ensure_ascii=False writes them, floats as repr (NaN, Infinity
// as Python's allow_nan writes them), object keys in their stored order
// unless sort_keys.
std::string PyJsonDumps(const nlohmann::ordered_json& value,
                        const PyJsonOptions& options);

// json.dumps(value, sort_keys=True, separators=(",", ":"),
// ensure_ascii=False): the canonical text behind lock_sha and state_sha256.
std::string PyJsonCanonical(const nlohmann::ordered_json& value);

// json.dumps(value, indent=2, ensure_ascii=False): the reference's rendering
// of a dict or list state (object keys in the order they were parsed).
std::string PyJsonDumpsIndent2(const nlohmann::ordered_json& value);

// The same, or nullopt once the text would pass `max_bytes`: indentation
// grows with depth, so a small deep value can render to megabytes, and the
// rendering stops there instead of building them.
std::optional<std::string> PyJsonDumpsIndent2(
    const nlohmann::ordered_json& value, size_t max_bytes);

}  // namespace mesa_anyjev::decision
