// Faults injected into chosen forward passes, for the tests of what the
// daemon does when a pass fails on the device (docs/reliability.md, "GPU
// faults"), and holds of the engine, for the tests that let calls queue and
// then read the order the engine served them in (docs/architecture.md,
// "Scheduling"). Only mesa-anyjevd's hidden --inject-faults flag makes one:
// no configuration file, environment variable or --set reaches it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/model/pass_failure.h"

namespace mesa_anyjev::engine {

using model::InjectedFault;

class FaultPlan {
 public:
  // "oom@3", "lost@5", "hold@1=/tmp/go", or several joined by commas: the
  // fault and the forward pass it strikes, counted from 1 since the model
  // loaded (the daemon's warm-up call runs pass 1); a hold keeps the engine
  // from planning that pass until the file named after '=' exists.
  static absl::StatusOr<FaultPlan> Parse(absl::string_view spec);

  // The file the engine waits for before planning pass `pass`, if any.
  std::optional<std::string> HoldBefore(int64_t pass) const;
  // Counts one pass; the fault planned for it, if any.
  std::optional<InjectedFault> NextPass();
  // "out of memory at pass 3, device lost at pass 5", for the start line.
  std::string Describe() const;

 private:
  struct Planned {
    int64_t pass;
    std::optional<InjectedFault> fault;  // none: a hold
    std::string until;                   // a hold's file
  };
  std::vector<Planned> planned_;
  int64_t passes_ = 0;
};

}  // namespace mesa_anyjev::engine
