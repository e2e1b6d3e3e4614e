// The engine's work on a model that has only the Backend seam (the fake
// model, the router's composite): one call to it per step, the held calls
// of one task taken in the scheduler's order and merged while their tokens
// fit the budget (a merged call costs what one does: one synthetic delay,
// one remote call), each answered with its share. The unit of preemption
// is the whole call.
#pragma once

#include <cstdint>

#include "server/engine/engine_observer.h"
#include "server/engine/forward_call.h"
#include "server/engine/work_loop.h"

namespace mesa_anyjev::engine {

class CallLoop final : public WorkLoop {
 public:
  // `model` (a BackendForwardModel over the Backend) and `observer` (may
  // be null) outlive the loop. `budget`: prompt tokens a merged call may
  // hold (the first call always runs).
  CallLoop(ForwardModel* model, int64_t budget, EngineObserver* observer);

  // The model checks its own input (Backend's contract).
  absl::Status Check(const ForwardJob&) const override {
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Step(HeldCalls& calls) override;

 private:
  ForwardModel* const model_;
  const int64_t budget_;
  EngineObserver* const observer_;
  int64_t calls_run_ = 0;
};

}  // namespace mesa_anyjev::engine
