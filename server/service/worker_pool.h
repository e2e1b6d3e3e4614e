// A few threads with a bounded queue for work that must not hold a gRPC
// callback thread while it waits (the bundle store's writes, the Logprobs
// replies; Decide and Fit have DecisionWorkers). A full queue refuses at
// once, naming itself, as the engine's own queue does.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace mesa_anyjev::service {

class WorkerPool {
 public:
  // `queue` names the queue in a refusal ("bundle store").
  WorkerPool(std::string queue, int32_t threads, int32_t capacity);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // RESOURCE_EXHAUSTED (naming the capacity) when `capacity` tasks already
  // wait, UNAVAILABLE once stopping; the task is then not run.
  absl::Status TrySubmit(std::function<void()> task);
  // Runs what was accepted, then joins. Idempotent.
  void Stop();

 private:
  void Loop();
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string queue_name_;
  const int32_t capacity_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace mesa_anyjev::service
