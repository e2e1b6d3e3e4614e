#include "server/model/device_facts.h"

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::model {

std::string CudaVersionText(int version) {
  if (version <= 0) return "";
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string Describe(const DeviceFacts& facts) {
  if (facts.device == "cpu") {
    return "device cpu (memory: the system's, MemAvailable)";
  }
  return absl::StrCat(
      "device ", facts.device, ": ", facts.name, ", compute capability ",
      facts.compute_capability, ", integrated ",
      facts.shared_memory ? "yes (memory: the system's, MemAvailable)" : "no",
      "; CUDA driver ", CudaVersionText(facts.driver_cuda), ", runtime ",
      CudaVersionText(facts.runtime_cuda));
}

absl::Status CheckDriverFitsRuntime(int driver_cuda, int runtime_cuda) {
  if (driver_cuda <= 0 || runtime_cuda <= 0 ||
      driver_cuda / 1000 >= runtime_cuda / 1000) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the NVIDIA driver supports CUDA ", CudaVersionText(driver_cuda),
      ", older than the CUDA ", CudaVersionText(runtime_cuda),
      " runtime this daemon's torch was built with: install a driver for "
      "CUDA ",
      runtime_cuda / 1000,
      " (580.65.06 or later for CUDA 13), or build against a torch for CUDA ",
      CudaVersionText(driver_cuda), " (docs/build.md)"));
}

}  // namespace mesa_anyjev::model
