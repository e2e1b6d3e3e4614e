// Reads the facts of the device a model is loaded on (device_facts.h) from
// the CUDA runtime: name, compute capability, integrated, the driver's and
// the runtime's CUDA versions, and a discrete device's free memory.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "absl/status/statusor.h"
#include "server/model/device_facts.h"

namespace mesa_anyjev::model {

// model.device: "cpu", "cuda" or "cuda:N". INVALID_ARGUMENT for anything
// else; FAILED_PRECONDITION for CUDA where it is not available.
absl::StatusOr<at::Device> ParseDevice(const std::string& name);

// The facts of model.device `name`. On CUDA the driver's and the runtime's
// versions are read first, so a driver too old for the runtime is one line
// naming both (CheckDriverFitsRuntime) rather than "CUDA is not available".
absl::StatusOr<DeviceFacts> ProbeDevice(const std::string& name);

}  // namespace mesa_anyjev::model
