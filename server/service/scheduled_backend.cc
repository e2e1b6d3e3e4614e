// Backend calls as engine jobs (see scheduled_backend.h).
#include "server/service/scheduled_backend.h"

#include <utility>

#include "absl/synchronization/notification.h"

namespace mesa_anyjev::service {

absl::Status ScheduledBackend::RunOnEngine(
    const CallControl& control,
    std::function<absl::Status(const CallControl&)> run) {
  absl::Notification done;
  absl::Status result;
  engine::Job job;
  job.deadline = control.deadline;
  job.cancelled = control.cancelled;
  job.run = std::move(run);
  job.done = [&](absl::Status status) {
    result = std::move(status);
    done.Notify();
  };
  // On refusal `done` is never called: answer here.
  if (absl::Status status = scheduler_->TrySubmit(std::move(job));
      !status.ok()) {
    return status;
  }
  done.WaitForNotification();
  return result;
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>>
ScheduledBackend::Logprobs(const std::vector<PromptGroup>& groups,
                           int32_t top_k, const CallControl& control) {
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> out =
      absl::InternalError("the engine did not run the job");
  absl::Status status =
      RunOnEngine(control, [&](const CallControl& engine_control) {
        out = model_->Logprobs(groups, top_k, engine_control);
        return out.status();
      });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<HiddenStatesResult> ScheduledBackend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  absl::StatusOr<HiddenStatesResult> out =
      absl::InternalError("the engine did not run the job");
  absl::Status status =
      RunOnEngine(control, [&](const CallControl& engine_control) {
        out = model_->HiddenStates(groups, layers, engine_control);
        return out.status();
      });
  if (!status.ok()) return status;
  return out;
}

}  // namespace mesa_anyjev::service
