// Backend calls as engine jobs (see queued_backend.h).
#include "server/service/queued_backend.h"

#include <utility>

#include "absl/synchronization/notification.h"
#include "common/status/status_macros.h"
#include "server/service/batched_jobs.h"

namespace mesa_anyjev::service {

absl::Status QueuedBackend::RunJob(engine::Job job) {
  absl::Notification done;
  absl::Status result;
  job.done = [&](absl::Status status) {
    result = std::move(status);
    done.Notify();
  };
  // On refusal `done` is never called: answer here.
  if (absl::Status status = job_queue_->TrySubmit(std::move(job));
      !status.ok()) {
    return status;
  }
  done.WaitForNotification();
  return result;
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>>
QueuedBackend::Logprobs(const std::vector<PromptGroup>& groups, int32_t top_k,
                        const CallControl& control) {
  LogprobsWork work{groups};
  engine::Job job = LogprobsJob(model_, &work, top_k);
  job.deadline = control.deadline;
  job.cancelled = control.cancelled;
  RETURN_IF_ERROR(RunJob(std::move(job)));
  return std::move(work.out);
}

absl::StatusOr<HiddenStatesResult> QueuedBackend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  HiddenStatesWork work{groups};
  engine::Job job = HiddenStatesJob(model_, &work, layers);
  job.deadline = control.deadline;
  job.cancelled = control.cancelled;
  RETURN_IF_ERROR(RunJob(std::move(job)));
  return std::move(work.out);
}

}  // namespace mesa_anyjev::service
