#include "server/engine/held_calls.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace mesa_anyjev::engine {

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

HeldCalls::HeldCalls(SchedulerPolicy policy, SchedulerLimits limits,
                     EngineObserver* observer)
    : observer_(observer), scheduler_(policy, limits) {}

void HeldCalls::SetTenants(const std::vector<TenantShare>& tenants) {
  absl::MutexLock lock(&mu_);
  scheduler_.SetTenants(tenants);
}

absl::Status HeldCalls::AdmitLocked(ForwardJob job,
                                    const absl::Status& refusal) {
  if (!refusal.ok()) return refusal;
  const int64_t tokens = TokensOf(job.groups);
  const Scheduler::JobId id = next_id_++;
  std::string refused_by;
  if (absl::Status admitted = scheduler_.Admit(
          id, job.caller.tenant, job.caller.priority, tokens, &refused_by);
      !admitted.ok()) {
    if (observer_ != nullptr)
      observer_->OnRefused(job.caller.tenant, refused_by);
    return admitted;
  }
  auto call = std::make_unique<HeldCall>();
  call->id = id;
  call->job = std::move(job);
  call->tokens = tokens;
  call->admitted = absl::Now();
  calls_[id] = std::move(call);
  // Under the lock, so the gauge can never end on a stale value.
  if (observer_ != nullptr) observer_->OnQueueDepth(scheduler_.waiting());
  return absl::OkStatus();
}

HeldCall* HeldCalls::Next(
    const std::function<bool(const HeldCall&)>& eligible) {
  const std::optional<Scheduler::JobId> id = scheduler_.Next(
      [&](Scheduler::JobId job) { return eligible(*calls_.at(job)); });
  return id.has_value() ? calls_.at(*id).get() : nullptr;
}

void HeldCalls::Charge(HeldCall& call, int64_t tokens) {
  scheduler_.Charge(call.id, tokens);
  if (!call.started) {
    call.started_at = absl::Now();
  }
  if (observer_ != nullptr) {
    if (!call.started) {
      observer_->OnQueueWait(call.job.caller.priority,
                             call.started_at - call.admitted);
      observer_->OnQueueDepth(scheduler_.waiting());
    }
    observer_->OnTenantTokens(call.job.caller.tenant, call.job.caller.priority,
                              tokens);
  }
  call.started = true;
}

std::vector<HeldCall*> HeldCalls::Stale(absl::Time now) {
  std::vector<HeldCall*> stale;
  for (HeldCall* call : All()) {
    if (!call->started && call->job.caller.ShouldStop(now)) {
      stale.push_back(call);
    }
  }
  return stale;
}

std::vector<HeldCall*> HeldCalls::All() {
  std::vector<HeldCall*> all;
  for (auto& [id, call] : calls_) all.push_back(call.get());
  // In admission order: answers in a sweep go out as the calls came.
  std::sort(all.begin(), all.end(),
            [](const HeldCall* a, const HeldCall* b) { return a->id < b->id; });
  return all;
}

int64_t HeldCalls::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(calls_.size());
}

void HeldCalls::Answer(HeldCall* call, absl::StatusOr<ForwardOutput> out) {
  std::unique_ptr<HeldCall> mine;
  {
    absl::MutexLock lock(&mu_);
    const auto it = calls_.find(call->id);
    if (it == calls_.end()) return;
    mine = std::move(it->second);
    calls_.erase(it);
    scheduler_.Finish(mine->id);
    if (!mine->started && observer_ != nullptr) {
      observer_->OnQueueDepth(scheduler_.waiting());
    }
  }
  if (observer_ != nullptr && mine->started) {
    observer_->OnRun(absl::Now() - mine->started_at);
  }
  mine->job.done(std::move(out));
}

void HeldCalls::AnswerStopped(HeldCall* call, absl::Time now) {
  absl::Status status = call->job.caller.StopStatus(
      now, call->started ? "the forward" : "waiting in the queue");
  if (observer_ != nullptr && !call->started) {
    observer_->OnQueueWait(call->job.caller.priority, now - call->admitted);
    observer_->OnSkipped(absl::IsCancelled(status) ? "cancelled" : "deadline");
  }
  Answer(call, std::move(status));
}

}  // namespace mesa_anyjev::engine
