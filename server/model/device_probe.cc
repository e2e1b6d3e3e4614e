#include "server/model/device_probe.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::model {
namespace {

absl::Status CudaFailed(const char* what, cudaError_t error) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " failed: ", cudaGetErrorString(error)));
}

}  // namespace

absl::StatusOr<at::Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return at::Device(at::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!at::hasCUDA()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model.device: '", name, "' asked for, but CUDA is not available"));
    }
    try {
      return at::Device(name);
    } catch (const c10::Error&) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.device: '", name, "' is not cpu, cuda or cuda:N"));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.device: '", name, "' is not cpu, cuda or cuda:N"));
}

absl::StatusOr<DeviceFacts> ProbeDevice(const std::string& name) {
  DeviceFacts facts;
  facts.device = name;
  facts.name = name;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    // Both answer without a usable device (0 when no driver is loaded).
    cudaDriverGetVersion(&facts.driver_cuda);
    cudaRuntimeGetVersion(&facts.runtime_cuda);
    RETURN_IF_ERROR(
        CheckDriverFitsRuntime(facts.driver_cuda, facts.runtime_cuda));
  }
  ASSIGN_OR_RETURN(const at::Device device, ParseDevice(name));
  if (!device.is_cuda()) return facts;
  const int index = device.has_index() ? device.index() : 0;
  facts.device = absl::StrCat("cuda:", index);
  cudaDeviceProp props{};
  if (cudaError_t e = cudaGetDeviceProperties(&props, index);
      e != cudaSuccess) {
    return CudaFailed("cudaGetDeviceProperties", e);
  }
  facts.name = props.name;
  facts.compute_capability = absl::StrCat(props.major, ".", props.minor);
  facts.shared_memory = props.integrated != 0;
  facts.device_total_bytes = static_cast<int64_t>(props.totalGlobalMem);
  if (!facts.shared_memory) {
    // On an integrated device this would be MemFree (page cache counted
    // as used): never read there.
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    size_t free = 0, total = 0;
    if (cudaError_t e = cudaMemGetInfo(&free, &total); e != cudaSuccess) {
      return CudaFailed("cudaMemGetInfo", e);
    }
    facts.device_free_bytes = static_cast<int64_t>(free);
  }
  return facts;
}

}  // namespace mesa_anyjev::model
