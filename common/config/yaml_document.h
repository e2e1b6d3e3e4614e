// One YAML document from text, safely: the configuration file and the tokens
// file are both read through here. yaml-cpp reports every problem by
// exception; none escapes this function.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace mesa_anyjev::config {

// The document `text` holds, or nullopt when it holds none (empty, or only
// comments). More than one document, or a syntax error, is
// INVALID_ARGUMENT "<where>: YAML syntax error at line L, column C: ...".
absl::StatusOr<std::optional<YAML::Node>> ParseOneYamlDocument(
    const std::string& text, const std::string& where);

}  // namespace mesa_anyjev::config
