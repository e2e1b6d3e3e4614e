// The bounded queue in front of the model and the one thread that owns it.
// gRPC threads submit jobs and return at once; the engine thread runs them in
// arrival order. A job whose deadline passed or whose caller cancelled is
// completed without running, so it never reaches the model.
//
// Batching across jobs: consecutive queued jobs at the front with the same
// non-empty batch_key run as ONE model call (run_batch) while their tokens fit
// the batch budget, so callers that queued behind each other share forwards.
// Each job still takes its own queue slot (admission is per call).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

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

  // Optional, for batching across jobs: jobs with equal non-empty keys are
  // compatible; `batch_tokens` is what this job adds to a merged call;
  // `batch_payload` is the caller's data for run_batch (valid until done).
  // run_batch runs every given job (the first is this one) as one model call
  // and returns one status per job; it replaces `run` when set.
  std::string batch_key;
  int64_t batch_tokens = 0;
  void* batch_payload = nullptr;
  std::function<std::vector<absl::Status>(const std::vector<Job*>& jobs,
                                          const CallControl& control)>
      run_batch;
};

class JobQueue {
 public:
  // `batch_budget`: tokens a merged call may hold (the first job always
  // runs, however large).
  JobQueue(int32_t capacity, EngineObserver* observer,
           int64_t batch_budget = 0);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

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
  // The front job and the compatible ones queued right behind it.
  std::vector<Queued> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Completes a job that will not run (deadline passed, caller cancelled);
  // false when it should run.
  bool SkipIfStale(Queued& item, absl::Time now);

  const int32_t capacity_;
  const int64_t batch_budget_;
  EngineObserver* const observer_;
  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mesa_anyjev::engine
