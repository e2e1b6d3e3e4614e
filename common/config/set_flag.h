// `--set section.field=value` flags, shared by mesa-anyjevd and mesa-anyjev:
// any config key can be overridden from the command line.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "common/config/config_loader.h"

namespace mesa_anyjev::config {

// "server.queue_capacity=8" -> Override{key, value, "flag --set ..."}.
// Unknown keys are refused later by LoadConfig, with the origin named.
absl::StatusOr<Override> ParseSetFlag(std::string_view text);

}  // namespace mesa_anyjev::config
