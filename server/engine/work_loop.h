// How the engine runs the calls it holds on its model, one unit of work at
// a time: a forward pass over a model runner (pass_loop.h), or one merged
// call over a model that has only the Backend seam, the fake model or the
// router's composite (call_loop.h). Both take the held calls in the
// scheduler's order (held_calls.h); the engine thread drives them.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/held_calls.h"

namespace mesa_anyjev::engine {

class WorkLoop {
 public:
  virtual ~WorkLoop() = default;

  // On the engine thread, once, before the first step (a runner makes its
  // device the thread's current one).
  virtual void Bind() {}

  // Whether `job` can run on this model at all, before it is held: every
  // token id in the vocabulary, layers and top_k in range, each group
  // within what the KV pool holds. INVALID_ARGUMENT or RESOURCE_EXHAUSTED
  // naming the field and the limit. Any thread.
  virtual absl::Status Check(const ForwardJob& job) const = 0;

  // One unit of work over `calls`, in their scheduling order; the calls it
  // finishes, fails or finds stopped are answered. Whether it ran a unit
  // (false: nothing was left to run), or the status that ends the engine's
  // service (a lost device) after the calls of the unit are answered.
  virtual absl::StatusOr<bool> Step(HeldCalls& calls) = 0;
};

}  // namespace mesa_anyjev::engine
