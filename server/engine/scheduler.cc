#include "server/engine/scheduler.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::engine {
namespace {

// Model code may throw (libtorch reports errors as c10::Error); exceptions
// stop here, once, and become INTERNAL for the caller.
absl::Status RunGuarded(Job& job, const CallControl& control) {
  try {
    return job.run(control);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model error: ", e.what()));
  }
}

}  // namespace

Scheduler::Scheduler(int32_t capacity, SchedulerObserver* observer)
    : capacity_(capacity), observer_(observer) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

absl::Status Scheduler::TrySubmit(Job job) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return absl::UnavailableError("the daemon is draining");
    }
    if (static_cast<int64_t>(queue_.size()) >= capacity_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full: ", capacity_,
                       " calls already wait for the model "
                       "(server.queue_capacity); retry later"));
    }
    queue_.push_back(Queued{std::move(job), absl::Now()});
    // Under the lock, so the gauge can never end on a stale value.
    if (observer_ != nullptr) {
      observer_->OnQueueDepth(static_cast<int64_t>(queue_.size()));
    }
  }
  return absl::OkStatus();
}

void Scheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t Scheduler::depth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

void Scheduler::Loop() {
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  };
  while (true) {
    Queued item;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
      if (observer_ != nullptr) {
        observer_->OnQueueDepth(static_cast<int64_t>(queue_.size()));
      }
    }
    const absl::Time start = absl::Now();
    if (observer_ != nullptr) observer_->OnQueueWait(start - item.enqueued);
    const CallControl control{item.job.deadline, item.job.cancelled};
    absl::Status status;
    if (control.cancelled != nullptr && control.cancelled->load()) {
      status = absl::CancelledError("the caller cancelled the call");
      if (observer_ != nullptr) observer_->OnSkipped("cancelled");
    } else if (start >= control.deadline) {
      status = absl::DeadlineExceededError(
          "the deadline passed while the call waited in the queue");
      if (observer_ != nullptr) observer_->OnSkipped("deadline");
    } else {
      status = RunGuarded(item.job, control);
      if (observer_ != nullptr) observer_->OnRun(absl::Now() - start);
    }
    item.job.done(std::move(status));
  }
}

}  // namespace mesa_anyjev::engine
