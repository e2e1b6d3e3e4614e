// Validation of a merged Config: ranges, enums, host:port, devices and the
// rules between keys. Each error names the key, the limit and where the
// value came from.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/config/config.h"

namespace mesa_anyjev::config {

// `origins` maps a key to the source that set it ("" or absent: default).
absl::Status ValidateMerged(
    const Config& config,
    const std::map<std::string, std::string, std::less<>>& origins);

}  // namespace mesa_anyjev::config
