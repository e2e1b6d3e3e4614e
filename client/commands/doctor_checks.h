// The doctor's checks (docs/cli.md), one line each, in the
// reference's order, for the chosen backend kind. Each group stops at its
// first failure, as the reference's does.
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"

namespace mesa_anyjev::client {

struct DoctorCheck {
  std::string name;
  bool ok = false;
  std::string detail;
};

// Runs every check for `kind` (fake, gateway, hf, composite).
std::vector<DoctorCheck> RunDoctorChecks(const config::Config& config,
                                         const std::string& kind);

// The reference's probe question and states: one clear Yes, one clear No.
inline constexpr char kProbeQuestion[] = "Is the sky blue?";
inline constexpr char kProbeStateYes[] = "The sky is blue today.";
inline constexpr char kProbeStateNo[] = "It is raining and grey.";

}  // namespace mesa_anyjev::client
