// Faults injected into chosen forward passes, for the tests of what the
// daemon does when a pass fails on the device (docs/reliability.md, "GPU
// faults"). Only mesa-anyjevd's hidden --inject-faults flag makes one: no
// configuration file, environment variable or --set reaches it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mesa_anyjev::engine {

enum class InjectedFault {
  kOutOfMemory,  // the pass runs out of device memory
  kDeviceLost,   // a CUDA error that leaves the context unusable
};

class FaultPlan {
 public:
  // "oom@3", "lost@5", or several joined by commas ("oom@2,lost@4"): the
  // fault and the forward pass it strikes, counted from 1 since the model
  // loaded (the daemon's warm-up call runs pass 1).
  static absl::StatusOr<FaultPlan> Parse(absl::string_view spec);

  // Counts one pass; the fault planned for it, if any.
  std::optional<InjectedFault> NextPass();
  // "out of memory at pass 3, device lost at pass 5", for the start line.
  std::string Describe() const;

 private:
  struct Planned {
    int64_t pass;
    InjectedFault fault;
  };
  std::vector<Planned> planned_;
  int64_t passes_ = 0;
};

}  // namespace mesa_anyjev::engine
