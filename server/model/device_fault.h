// A forward pass that failed on the device in a way that leaves its CUDA
// context unusable (an illegal address, an unspecified launch failure, an
// uncorrectable ECC error): every later call would fail the same way, so
// the daemon stops serving and exits for its supervisor to start a fresh
// process (docs/reliability.md, "GPU faults"). The engine marks such a
// status; the daemon reads the mark.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mesa_anyjev::model {

// The exit code of a daemon whose device was lost: EX_TEMPFAIL of
// sysexits.h, "try again later", which a fresh process does.
inline constexpr int kDeviceLostExitCode = 75;

// UNAVAILABLE (another replica, or this one restarted, can answer the
// call), carrying the device-lost mark.
absl::Status DeviceLostError(absl::string_view message);
bool IsDeviceLost(const absl::Status& status);

}  // namespace mesa_anyjev::model
