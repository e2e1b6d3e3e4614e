#include "server/engine/pass_failure.h"

#include <c10/util/Exception.h>

#include <array>
#include <new>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/text/utf8.h"
#include "server/engine/device_fault.h"
#include "server/model/cuda/cuda_calls.h"

namespace mesa_anyjev::engine {
namespace {

// CUDA errors after which the context is unusable ("sticky": every later
// call returns them), by their cudaError_t numbers in driver_types.h.
constexpr std::array<int32_t, 13> kStickyCudaErrors = {
    214,  // cudaErrorECCUncorrectable
    220,  // cudaErrorNvlinkUncorrectable
    700,  // cudaErrorIllegalAddress
    702,  // cudaErrorLaunchTimeout
    709,  // cudaErrorContextIsDestroyed
    710,  // cudaErrorAssert (a device-side assert)
    714,  // cudaErrorHardwareStackError
    715,  // cudaErrorIllegalInstruction
    716,  // cudaErrorMisalignedAddress
    717,  // cudaErrorInvalidAddressSpace
    718,  // cudaErrorInvalidPc
    719,  // cudaErrorLaunchFailure ("unspecified launch failure")
    999,  // cudaErrorUnknown
};

// The same errors as libraries word them when they throw a plain c10::Error
// (cuBLAS, cuDNN and NCCL wrappers).
const std::array<absl::string_view, 6> kStickyPhrases = {
    "illegal memory access", "unspecified launch failure",
    "uncorrectable ECC",     "device-side assert",
    "misaligned address",    "illegal instruction",
};

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
      dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return true;
  }
  // cudaErrorMemoryAllocation from a raw CUDA call, and the libraries that
  // allocate their own workspace, say it their way; none of them leaves the
  // context unusable.
  if (const auto* a = dynamic_cast<const c10::AcceleratorError*>(&e)) {
    if (a->get_error_code() == 2) return true;
  }
  const absl::string_view what = e.what();
  return absl::StrContains(what, "CUBLAS_STATUS_ALLOC_FAILED") ||
         absl::StrContains(what, "CUDNN_STATUS_ALLOC_FAILED");
}

bool LeavesContextUnusable(const std::exception& e, bool on_cuda) {
  if (const auto* a = dynamic_cast<const c10::AcceleratorError*>(&e)) {
    for (int32_t code : kStickyCudaErrors) {
      if (a->get_error_code() == code) return true;
    }
  }
  const absl::string_view what = e.what();
  for (absl::string_view phrase : kStickyPhrases) {
    if (absl::StrContains(what, phrase)) return true;
  }
  if (!on_cuda) return false;
  // Anything else on CUDA: a context that still works synchronises.
  try {
    model::cuda::Synchronize(model::cuda::CurrentDevice());
  } catch (const std::exception&) {
    return true;
  }
  return false;
}

}  // namespace

std::string ExceptionLine(const std::exception& e) {
  const std::string_view what = e.what();
  return text::Printable(what.substr(0, what.find('\n')), 400);
}

absl::Status PassFailure(const std::exception& e, const PassSize& size,
                         const std::string& device) {
  const bool on_cuda = absl::StartsWith(device, "cuda");
  if (IsOutOfMemory(e)) {
    // The pass's tensors are gone; what the allocator kept of them goes
    // back to the device, for other processes and the next pass alike.
    if (on_cuda) model::cuda::EmptyCache();
    return absl::ResourceExhaustedError(absl::StrCat(
        "a forward pass of ", size.tokens, " new tokens (", size.segments,
        " segments) ran out of memory on ", device, ": ", ExceptionLine(e),
        "; lower engine.batch_tokens (", size.batch_tokens,
        " now) for smaller passes, or send smaller calls"));
  }
  if (LeavesContextUnusable(e, on_cuda)) {
    return DeviceLostError(absl::StrCat(
        "the device failed in a forward pass (", ExceptionLine(e), ") and its ",
        "CUDA context is unusable: the daemon stops serving and exits with "
        "code ",
        kDeviceLostExitCode, " for its supervisor to start a fresh one"));
  }
  return absl::InternalError(
      absl::StrCat("the forward pass failed: ", ExceptionLine(e)));
}

void ThrowInjected(InjectedFault fault) {
  const c10::SourceLocation here{__func__, __FILE__, __LINE__};
  if (fault == InjectedFault::kOutOfMemory) {
    throw c10::OutOfMemoryError(
        here,
        "out of memory. Tried to allocate 2.00 GiB (injected by "
        "--inject-faults)");
  }
  throw c10::AcceleratorError(here, /*cudaErrorIllegalAddress*/ 700,
                              "CUDA error: an illegal memory access was "
                              "encountered (injected by --inject-faults)");
}

}  // namespace mesa_anyjev::engine
