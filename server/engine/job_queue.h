// The bounded queue in front of the model and the one thread that owns it.
// Callers submit typed forward jobs and return at once; the engine thread
// runs them in arrival order. A job whose deadline passed or whose caller
// cancelled is answered without running, so it never reaches the model.
//
// Batching across calls: the front job and the jobs queued right behind it
// with an equal task (same top_k, same layers) run as ONE ForwardCall while
// their tokens fit the batch budget, so callers that queued behind each
// other share forward passes. Each job still takes its own queue slot
// (admission is per call) and gets its own answer.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "server/engine/engine_observer.h"
#include "server/engine/forward_call.h"

namespace mesa_anyjev::engine {

struct ForwardJob {
  ForwardTask task;
  std::vector<PromptGroup> groups;
  Caller caller;  // its deadline and cancel flag (the caller's own)
  // Called exactly once, on the engine thread, with the job's share of the
  // output or why it has none. It hands the value over and returns (wakes
  // the waiting caller, or queues the answer for a thread of the caller's):
  // the engine thread runs no work of the layers above it. Not called for a
  // job TrySubmit refused.
  std::function<void(absl::StatusOr<ForwardOutput>)> done;
};

class JobQueue {
 public:
  // `batch_budget`: tokens a merged call may hold (the front job always
  // runs, however large).
  JobQueue(int32_t capacity, EngineObserver* observer,
           int64_t batch_budget = 0);
  ~JobQueue();
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  void Start();
  // The model jobs run on, once loaded (it outlives the queue's use of
  // it); a job that runs before is answered UNAVAILABLE.
  void SetModel(ForwardModel* model) { model_.store(model); }
  // Refuses at once when the queue is full (RESOURCE_EXHAUSTED naming the
  // capacity) or stopping (UNAVAILABLE); never blocks the caller. On refusal
  // the job's `done` is NOT called: the caller answers itself.
  absl::Status TrySubmit(ForwardJob job);
  // For a caller with a thread of its own to block (a decision worker, the
  // warm-up): submits the job and waits for its output.
  absl::StatusOr<ForwardOutput> SubmitAndWait(ForwardTask task,
                                              std::vector<PromptGroup> groups,
                                              Caller caller);
  // Finishes every accepted job (running or skipping it), then joins.
  void Stop();

  int64_t depth() const;
  int32_t capacity() const { return capacity_; }

 private:
  struct Queued {
    ForwardJob job;
    absl::Time enqueued;
    int64_t tokens = 0;
  };
  void Loop();
  // The front job and the compatible ones queued right behind it.
  std::vector<Queued> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers a job that will not run (deadline passed, caller cancelled);
  // false when it should run.
  bool SkipIfStale(Queued& item, absl::Time now);
  // Runs the live jobs as one call and answers each.
  void RunMerged(const std::vector<Queued*>& live, absl::Time start);

  const int32_t capacity_;
  const int64_t batch_budget_;
  EngineObserver* const observer_;
  std::atomic<ForwardModel*> model_{nullptr};
  mutable absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mesa_anyjev::engine
