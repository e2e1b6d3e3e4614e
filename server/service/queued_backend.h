// A Backend whose model calls are engine jobs: each Logprobs / HiddenStates
// is one ForwardJob (queued behind other callers, skipped when its deadline
// passed or its caller cancelled, merged with compatible jobs queued with
// it) and the calling thread waits for its output. The decision engine runs
// on a worker of its own over this adapter, so the one engine thread stays
// the only thread that touches the model and no gRPC thread blocks on it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/backend.h"
#include "server/engine/job_queue.h"

namespace mesa_anyjev::service {

class QueuedBackend final : public ForwardingBackend {
 public:
  // Both outlive the adapter.
  QueuedBackend(Backend* model, engine::JobQueue* job_queue)
      : ForwardingBackend(model), job_queue_(job_queue) {}

  // Blocks the caller until the engine has run (or skipped) the job; a full
  // engine queue is RESOURCE_EXHAUSTED at once.
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override;
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;

 private:
  engine::JobQueue* const job_queue_;
};

}  // namespace mesa_anyjev::service
