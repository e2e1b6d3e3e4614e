// The calls the engine holds, from admission to their answer, and the order
// the scheduler takes them in (scheduler.h), under one lock: callers submit
// from any thread, the engine thread plans passes from them and answers
// them. A call is answered exactly once, outside the lock (its `done`
// hands the value to its caller's thread), and leaves then.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "server/engine/engine_observer.h"
#include "server/engine/forward_call.h"
#include "server/engine/scheduler.h"

namespace mesa_anyjev::engine {

struct ForwardJob {
  ForwardTask task;
  std::vector<PromptGroup> groups;
  Caller caller;  // its deadline, cancel flag, tenant and class
  // Called exactly once, on the engine thread, with the job's share of the
  // output or why it has none. It hands the value over and returns (wakes
  // the waiting caller, or queues the answer for a thread of the caller's):
  // the engine thread runs no work of the layers above it. Not called for a
  // job the engine refused at submission.
  std::function<void(absl::StatusOr<ForwardOutput>)> done;
};

// Prompt tokens of a call: what it costs the tenant's limits.
int64_t TokensOf(const std::vector<PromptGroup>& groups);

struct HeldCall {
  Scheduler::JobId id = 0;
  ForwardJob job;
  int64_t tokens = 0;
  absl::Time admitted;
  absl::Time started_at;  // when its first work was planned
  bool started = false;   // some of its work was planned
};

class HeldCalls {
 public:
  HeldCalls(SchedulerPolicy policy, SchedulerLimits limits,
            EngineObserver* observer);

  void SetTenants(const std::vector<TenantShare>& tenants)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Holds the call, or refuses it (`refusal` when set, else the
  // scheduler's limits) and returns why, never calling its `done`.
  absl::Status AdmitLocked(ForwardJob job, const absl::Status& refusal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls admitted so far: a count that moves when one arrives.
  int64_t admitted() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int64_t>(next_id_);
  }

  // The engine thread's side: the lock, held while it takes calls in the
  // scheduler's order and plans from them.
  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  HeldCall* Next(const std::function<bool(const HeldCall&)>& eligible)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InteractiveBesideBatch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return scheduler_.InteractiveBesideBatch();
  }
  // `tokens` of the call's work are planned into a pass (its first: the
  // queue wait ends).
  void Charge(HeldCall& call, int64_t tokens)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls not started whose caller stopped; they are answered at once.
  std::vector<HeldCall*> Stale(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every call held.
  std::vector<HeldCall*> All() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  bool empty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return calls_.empty();
  }

  // Answers `call` and lets it go (its pointer dies).
  void Answer(HeldCall* call, absl::StatusOr<ForwardOutput> out)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The answer of a call stopped before it ran: its caller's status.
  void AnswerStopped(HeldCall* call, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  EngineObserver* const observer_;
  mutable absl::Mutex mu_;
  Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Scheduler::JobId, std::unique_ptr<HeldCall>> calls_
      ABSL_GUARDED_BY(mu_);
  Scheduler::JobId next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace mesa_anyjev::engine
