// The decision workers. Decide and Fit wait on the engine for their whole
// call, so the workers decide which calls the engine can see: FIFO over a
// few threads would let one pipeline's calls in flight take every worker,
// and a curator's one question would wait behind a dataset run before it
// reached the engine's scheduler. So each priority class has threads of its
// own (an interactive call never waits for a worker held by batch work),
// and inside a class a free worker takes the waiting call of the tenant
// with the fewest calls running per unit of weight (ties: the older call):
// the engine then holds every tenant's work and shares passes by tokens
// (docs/architecture.md, "Scheduling"). A full queue refuses at once.
// Not fair (engine.scheduler: fifo, the order it replaced): one set of
// threads takes every call in arrival order, whatever its class.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"

namespace mesa_anyjev::service {

class DecisionWorkers {
 public:
  // Whose call a task is: its tenant ("" with auth off), class and weight.
  struct Owner {
    std::string tenant;
    Priority priority = Priority::kInteractive;
    double weight = 1.0;
  };

  // `threads` for each class (in all when not `fair`); at most `capacity`
  // tasks waiting in all.
  DecisionWorkers(int32_t threads, int32_t capacity, bool fair = true);
  ~DecisionWorkers();
  DecisionWorkers(const DecisionWorkers&) = delete;
  DecisionWorkers& operator=(const DecisionWorkers&) = delete;

  // RESOURCE_EXHAUSTED (naming the capacity) when `capacity` tasks already
  // wait, UNAVAILABLE once stopping; the task is then not run.
  absl::Status TrySubmit(Owner owner, std::function<void()> task);
  // Runs what was accepted, then joins. Idempotent.
  void Stop();

 private:
  struct Waiting {
    Owner owner;
    std::function<void()> task;
  };
  static constexpr size_t kClasses = 2;
  // A worker's wait: for its class's work (or the stop).
  struct Mine {
    const DecisionWorkers* workers;
    size_t priority;
    static bool Ready(const Mine* mine) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  };

  void Loop(size_t priority);
  bool Ready(size_t priority) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The task a free worker of `priority` takes next (its position).
  size_t NextLocked(size_t priority) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int32_t capacity_;
  const bool fair_;
  absl::Mutex mu_;
  // By class, each in arrival order.
  std::deque<Waiting> waiting_[kClasses] ABSL_GUARDED_BY(mu_);
  // Tasks running, by (class, tenant).
  std::map<std::pair<size_t, std::string>, int32_t> running_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace mesa_anyjev::service
