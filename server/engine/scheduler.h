// The bounded queue in front of the model and the one thread that owns it.
// gRPC threads submit jobs and return at once; the engine thread runs them in
// arrival order. A job whose deadline passed or whose caller cancelled is
// completed without running, so it never reaches the model.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "server/engine/engine_observer.h"

namespace mesa_anyjev::engine {

struct Job {
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancelled = nullptr;  // owned by the caller
  // Runs on the engine thread. Checks `control` between units of work.
  std::function<absl::Status(const CallControl& control)> run;
  // Called exactly once, on the engine thread, with run's status or the
  // reason it did not run. The job is not touched after `done` returns.
  std::function<void(absl::Status)> done;
};

// The scheduler reports through the engine's observer.
using SchedulerObserver = EngineObserver;

class Scheduler {
 public:
  Scheduler(int32_t capacity, SchedulerObserver* observer);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void Start();
  // Refuses at once when the queue is full (RESOURCE_EXHAUSTED naming the
  // capacity) or stopping (UNAVAILABLE); never blocks the caller. On refusal
  // the job's `done` is NOT called: the caller answers itself.
  absl::Status TrySubmit(Job job);
  // Finishes every accepted job (running or skipping it), then joins.
  void Stop();

  int64_t depth() const;
  int32_t capacity() const { return capacity_; }

 private:
  struct Queued {
    Job job;
    absl::Time enqueued;
  };
  void Loop();

  const int32_t capacity_;
  SchedulerObserver* const observer_;
  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mesa_anyjev::engine
