// Secrets (bearer tokens, API keys) come from an environment variable or a
// file only its owner can read, never from flags (visible in `ps`) or the
// YAML file. Callers never log the value.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mesa_anyjev::util {

// `env_name` (the name of a variable) wins over `file`; both empty = no secret
// (nullopt). A named variable that is unset or empty, a file that is missing,
// group/world accessible (mode & 077), or empty is an error naming the
// variable or path (never the value). Trailing whitespace is stripped.
absl::StatusOr<std::optional<std::string>> LoadSecret(
    const std::string& env_name, const std::string& file,
    const std::string& what);

}  // namespace mesa_anyjev::util
