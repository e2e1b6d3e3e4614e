// What the daemon knows of the device it loads the model on, read once
// before loading (device_probe.h on libtorch fills it): logged at start,
// exported on mesa_anyjev_device_info and in GetModelInfo. Plain C++ so the
// checks on it are unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace mesa_anyjev::model {

struct DeviceFacts {
  std::string device;              // "cpu", "cuda:0"
  std::string name;                // "NVIDIA GB10", "NVIDIA H200", "cpu"
  std::string compute_capability;  // "12.1"; empty on the CPU
  // The device's memory is the system's: the CPU, or a CUDA device with
  // cudaDeviceProp::integrated set (the GB10). Then MemAvailable is what a
  // load must fit in, and cudaMemGetInfo is not read (it reports MemFree,
  // which counts the page cache as used).
  bool shared_memory = true;
  int driver_cuda = 0;  // cudaDriverGetVersion: 13000 = CUDA 13.0; 0 on the CPU
  int runtime_cuda = 0;  // cudaRuntimeGetVersion of the libcudart loaded
  int64_t device_free_bytes = 0;  // discrete CUDA devices only
  int64_t device_total_bytes = 0;
};

// 13020 -> "13.2"; 0 -> "".
std::string CudaVersionText(int version);

// One line for the start-up log.
std::string Describe(const DeviceFacts& facts);

// FAILED_PRECONDITION naming both versions and the remedy when the driver's
// CUDA major version is older than the runtime's (CUDA's minor-version
// compatibility covers a newer minor on the same major, e.g. a CUDA 13.2
// runtime on a 580 driver's 13.0).
absl::Status CheckDriverFitsRuntime(int driver_cuda, int runtime_cuda);

}  // namespace mesa_anyjev::model
