// Backend calls as engine jobs (see queued_backend.h).
#include "server/service/queued_backend.h"

#include <utility>

namespace mesa_anyjev::service {

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>>
QueuedBackend::Logprobs(const std::vector<PromptGroup>& groups, int32_t top_k,
                        const CallControl& control) {
  return engine::OutputAs<engine::GroupLogprobs>(job_queue_->SubmitAndWait(
      engine::LogprobsTask{top_k}, groups, control.caller()));
}

absl::StatusOr<HiddenStatesResult> QueuedBackend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  return engine::OutputAs<HiddenStatesResult>(job_queue_->SubmitAndWait(
      engine::HiddenStatesTask{layers}, groups, control.caller()));
}

}  // namespace mesa_anyjev::service
