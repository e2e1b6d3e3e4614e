// Engine jobs for Logprobs and HiddenStates that the job queue may merge with
// compatible queued jobs (same top_k, same layers) into one model call, so
// prompts of calls that waited behind each other share forward batches. Both
// the Inference service and the decision engine's QueuedBackend submit
// these; each caller sets deadline, cancelled and done, and reads `out`.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/backend.h"
#include "server/engine/job_queue.h"

namespace mesa_anyjev::service {

struct LogprobsWork {
  std::vector<PromptGroup> groups;
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> out =
      absl::InternalError("the engine did not run the job");
};

struct HiddenStatesWork {
  std::vector<PromptGroup> groups;
  absl::StatusOr<HiddenStatesResult> out =
      absl::InternalError("the engine did not run the job");
};

// `work` must stay alive until the job's done runs (capture it there).
engine::Job LogprobsJob(Backend* model, LogprobsWork* work, int32_t top_k);
engine::Job HiddenStatesJob(Backend* model, HiddenStatesWork* work,
                            std::vector<int32_t> layers);

}  // namespace mesa_anyjev::service
