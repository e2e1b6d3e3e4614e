// The model's choice of kernel paths, made once at load: model.kernels
// (config/kernel_set.h) against the device and this build.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "common/config/kernel_set.h"

namespace mesa_anyjev::model::kernels {

// What runs on `device`: ours only on CUDA in a build with the .cu files;
// the rest falls back to the ATen path, and `note` says so (for the log).
config::KernelSet ResolveKernels(const config::KernelSet& asked,
                                 const c10::Device& device, std::string* note);

}  // namespace mesa_anyjev::model::kernels
