// What an exception from a forward pass means for the calls in it
// (docs/reliability.md, "GPU faults"): out of memory fails them with
// RESOURCE_EXHAUSTED naming the pass's size and the setting that bounds it,
// after the device's cached memory goes back; a CUDA error that leaves the
// context unusable fails them with the device-lost mark (device_fault.h);
// anything else is INTERNAL. libtorch stays out of this header.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "absl/status/status.h"

namespace mesa_anyjev::model {

// What the tests' fault plan (server/engine/fault_plan.h) makes a pass do.
enum class InjectedFault {
  kOutOfMemory,  // the pass runs out of device memory
  kDeviceLost,   // a CUDA error that leaves the context unusable
};

struct PassSize {
  int64_t tokens = 0;        // new tokens of the pass
  int64_t segments = 0;      // packed segments
  int64_t batch_tokens = 0;  // engine.batch_tokens
};

// An exception's first line, printable, for a status: c10::Error's what()
// carries a C++ backtrace after it, which stays out of errors.
std::string ExceptionLine(const std::exception& e);

// Called in the handler, once the pass's tensors are gone.
absl::Status PassFailure(const std::exception& e, const PassSize& size,
                         const std::string& device);

// Throws what libtorch throws for `fault` (c10::OutOfMemoryError, or the
// c10::AcceleratorError of an illegal address), for the fault tests.
[[noreturn]] void ThrowInjected(InjectedFault fault);

}  // namespace mesa_anyjev::model
