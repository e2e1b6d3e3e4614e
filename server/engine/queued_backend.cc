#include "server/engine/queued_backend.h"

namespace mesa_anyjev::engine {

ServedModel ServedModel::Of(const Backend& backend) {
  return {backend.identity(),
          backend.capabilities(),
          &backend.tokenizer(),
          &backend.chat_template(),
          [&backend] { return backend.device_memory(); },
          backend.device_info()};
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>>
QueuedBackend::Logprobs(const std::vector<PromptGroup>& groups, int32_t top_k,
                        const CallControl& control) {
  return OutputAs<GroupLogprobs>(
      engine_->SubmitAndWait(LogprobsTask{top_k}, groups, control.caller()));
}

absl::StatusOr<HiddenStatesResult> QueuedBackend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  return OutputAs<HiddenStatesResult>(engine_->SubmitAndWait(
      HiddenStatesTask{layers}, groups, control.caller()));
}

}  // namespace mesa_anyjev::engine
