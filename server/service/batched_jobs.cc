#include "server/service/batched_jobs.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mesa_anyjev::service {
namespace {

int64_t TokensOf(const std::vector<PromptGroup>& groups) {
  int64_t tokens = 0;
  for (const PromptGroup& group : groups) {
    tokens += static_cast<int64_t>(group.prefix.size());
    for (const auto& suffix : group.suffixes) {
      tokens += static_cast<int64_t>(suffix.size());
    }
  }
  return tokens;
}

// Every job's groups, in job order: the one job's own vector when alone (no
// copy), else `merged` filled.
template <typename Work>
const std::vector<PromptGroup>& GroupsOf(const std::vector<engine::Job*>& jobs,
                                         std::vector<PromptGroup>* merged) {
  if (jobs.size() == 1) {
    return static_cast<Work*>(jobs.front()->batch_payload)->groups;
  }
  for (engine::Job* job : jobs) {
    const auto& groups = static_cast<Work*>(job->batch_payload)->groups;
    merged->insert(merged->end(), groups.begin(), groups.end());
  }
  return *merged;
}

// The merged call's control with one part per job, so the engine can drop a
// job whose caller stopped and go on with the others.
template <typename Work>
CallControl PartsOf(const std::vector<engine::Job*>& jobs,
                    const CallControl& control) {
  CallControl out = control;
  if (jobs.size() < 2) return out;
  size_t first = 0;
  for (engine::Job* job : jobs) {
    out.parts.push_back({first, job->deadline, job->cancelled});
    first += static_cast<Work*>(job->batch_payload)->groups.size();
  }
  return out;
}

// A member whose caller stopped while the merged call ran gets its own
// status, not the (partial) results.
absl::Status StoppedDuring(const engine::Job& job) {
  return CallPart{0, job.deadline, job.cancelled}.StopStatus(absl::Now(),
                                                             "the forward");
}

}  // namespace

engine::Job LogprobsJob(Backend* model, LogprobsWork* work, int32_t top_k) {
  engine::Job job;
  job.batch_key = absl::StrCat("logprobs/", top_k);
  job.batch_tokens = TokensOf(work->groups);
  job.batch_payload = work;
  job.run_batch = [model, top_k](const std::vector<engine::Job*>& jobs,
                                 const CallControl& control) {
    std::vector<PromptGroup> merged;
    auto result = model->Logprobs(GroupsOf<LogprobsWork>(jobs, &merged), top_k,
                                  PartsOf<LogprobsWork>(jobs, control));
    std::vector<absl::Status> statuses;
    size_t g = 0;  // the next group of the merged result
    for (engine::Job* member : jobs) {
      auto* mine = static_cast<LogprobsWork*>(member->batch_payload);
      if (!result.ok()) {
        mine->out = result.status();
      } else {
        const size_t n = mine->groups.size();
        mine->out = std::vector<std::vector<PromptLogprobs>>(
            std::make_move_iterator(result->begin() + g),
            std::make_move_iterator(result->begin() + g + n));
        g += n;
      }
      if (const absl::Status s = StoppedDuring(*member);
          jobs.size() > 1 && !s.ok()) {
        mine->out = s;
      }
      statuses.push_back(mine->out.status());
    }
    return statuses;
  };
  return job;
}

engine::Job HiddenStatesJob(Backend* model, HiddenStatesWork* work,
                            std::vector<int32_t> layers) {
  engine::Job job;
  job.batch_key = absl::StrCat("hidden/", absl::StrJoin(layers, ","));
  job.batch_tokens = TokensOf(work->groups);
  job.batch_payload = work;
  job.run_batch = [model, layers = std::move(layers)](
                      const std::vector<engine::Job*>& jobs,
                      const CallControl& control) {
    std::vector<PromptGroup> merged;
    auto result =
        model->HiddenStates(GroupsOf<HiddenStatesWork>(jobs, &merged), layers,
                            PartsOf<HiddenStatesWork>(jobs, control));
    std::vector<absl::Status> statuses;
    size_t offset = 0;  // the next value of the merged result
    for (engine::Job* member : jobs) {
      auto* mine = static_cast<HiddenStatesWork*>(member->batch_payload);
      if (!result.ok()) {
        mine->out = result.status();
      } else {
        HiddenStatesResult part;
        part.layers = result->layers;
        part.hidden_size = result->hidden_size;
        for (const PromptGroup& group : mine->groups) {
          part.n_prompts += static_cast<int32_t>(group.suffixes.size());
        }
        const size_t n = static_cast<size_t>(part.n_prompts) *
                         part.layers.size() *
                         static_cast<size_t>(part.hidden_size);
        part.values.assign(result->values.begin() + offset,
                           result->values.begin() + offset + n);
        offset += n;
        mine->out = std::move(part);
      }
      if (const absl::Status s = StoppedDuring(*member);
          jobs.size() > 1 && !s.ok()) {
        mine->out = s;
      }
      statuses.push_back(mine->out.status());
    }
    return statuses;
  };
  return job;
}

}  // namespace mesa_anyjev::service
