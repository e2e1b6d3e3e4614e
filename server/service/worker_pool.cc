// A bounded queue and its threads (see worker_pool.h).
#include "server/service/worker_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/retry_after.h"

namespace mesa_anyjev::service {

WorkerPool::WorkerPool(std::string queue, int32_t threads, int32_t capacity)
    : queue_name_(std::move(queue)), capacity_(capacity) {
  for (int32_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
  }
}

WorkerPool::~WorkerPool() { Stop(); }

absl::Status WorkerPool::TrySubmit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return WithRetryAfter(
        absl::UnavailableError("the daemon is draining; retry elsewhere"),
        kDrainingRetryAfter);
  }
  if (static_cast<int32_t>(queue_.size()) >= capacity_) {
    return WithRetryAfter(absl::ResourceExhaustedError(absl::StrCat(
                              queue_name_, " queue full (", capacity_,
                              " calls waiting for its worker); retry later")),
                          kQueueFullRetryAfter);
  }
  queue_.push_back(std::move(task));
  return absl::OkStatus();
}

void WorkerPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  threads_.clear();
}

bool WorkerPool::Ready() const { return stopping_ || !queue_.empty(); }

void WorkerPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &WorkerPool::Ready));
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace mesa_anyjev::service
