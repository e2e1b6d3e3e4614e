// What the kernels' ATen side shares: the checks that a tensor can go to a
// launcher (cuda_launch.h), the current stream, and the launch's error as
// a c10::Error naming the kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

#include "server/model/kernels/cuda_launch.h"

namespace mesa_anyjev::model::kernels {

// The launcher's dtype of `t` (float32, bfloat16 or float16).
cuda::Dtype LaunchDtype(const at::Tensor& t, const char* kernel);

// Each defined tensor of `tensors` on CUDA on `device`, contiguous, of
// `dtype`, its data 16-byte aligned where the kernel reads it in 16-byte
// packs (`packed`).
void CheckForLaunch(const char* kernel, const at::Device& device,
                    at::ScalarType dtype,
                    std::initializer_list<const at::Tensor*> tensors,
                    bool packed = true);

// The current CUDA stream of `device` (the caller holds a device guard).
cuda::Stream CurrentStream(const at::Device& device);

// A launcher's error as a c10::Error naming the kernel.
void CheckLaunched(int error, const char* kernel);

}  // namespace mesa_anyjev::model::kernels
