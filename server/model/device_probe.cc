#include "server/model/device_probe.h"

#include <ATen/Context.h>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "server/model/cuda/cuda_calls.h"

namespace mesa_anyjev::model {

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
    const cuda::Versions versions = cuda::ReadVersions();
    facts.driver_cuda = versions.driver;
    facts.runtime_cuda = versions.runtime;
    RETURN_IF_ERROR(
        CheckDriverFitsRuntime(facts.driver_cuda, facts.runtime_cuda));
  }
  ASSIGN_OR_RETURN(const at::Device device, ParseDevice(name));
  if (!device.is_cuda()) return facts;
  const int index = device.has_index() ? device.index() : 0;
  facts.device = absl::StrCat("cuda:", index);
  ASSIGN_OR_RETURN(const cuda::Properties props, cuda::ReadProperties(index));
  facts.name = props.name;
  facts.compute_capability = absl::StrCat(props.major, ".", props.minor);
  facts.shared_memory = props.integrated;
  facts.device_total_bytes = props.total_bytes;
  if (!facts.shared_memory) {
    // On an integrated device this would be MemFree (page cache counted
    // as used): never read there.
    ASSIGN_OR_RETURN(facts.device_free_bytes, cuda::FreeBytes(index));
  }
  return facts;
}

}  // namespace mesa_anyjev::model
