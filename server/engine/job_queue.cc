#include "server/engine/job_queue.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/retry_after.h"

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

std::vector<absl::Status> RunBatchGuarded(const std::vector<Job*>& jobs,
                                          const CallControl& control) {
  try {
    std::vector<absl::Status> out = jobs.front()->run_batch(jobs, control);
    if (out.size() == jobs.size()) return out;
    return std::vector<absl::Status>(
        jobs.size(), absl::InternalError("run_batch: one status per job"));
  } catch (const std::exception& e) {
    return std::vector<absl::Status>(
        jobs.size(),
        absl::InternalError(absl::StrCat("model error: ", e.what())));
  }
}

}  // namespace

JobQueue::JobQueue(int32_t capacity, EngineObserver* observer,
                   int64_t batch_budget)
    : capacity_(capacity), batch_budget_(batch_budget), observer_(observer) {}

JobQueue::~JobQueue() { Stop(); }

void JobQueue::Start() {
  thread_ = std::thread([this] { Loop(); });
}

absl::Status JobQueue::TrySubmit(Job job) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return WithRetryAfter(absl::UnavailableError("the daemon is draining"),
                            kDrainingRetryAfter);
    }
    if (static_cast<int64_t>(queue_.size()) >= capacity_) {
      return WithRetryAfter(absl::ResourceExhaustedError(absl::StrCat(
                                "queue full: ", capacity_,
                                " calls already wait for the model "
                                "(server.queue_capacity); retry later")),
                            kQueueFullRetryAfter);
    }
    queue_.push_back(Queued{std::move(job), absl::Now()});
    // Under the lock, so the gauge can never end on a stale value.
    if (observer_ != nullptr) {
      observer_->OnQueueDepth(static_cast<int64_t>(queue_.size()));
    }
  }
  return absl::OkStatus();
}

void JobQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t JobQueue::depth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

std::vector<JobQueue::Queued> JobQueue::TakeBatch() {
  std::vector<Queued> batch;
  batch.push_back(std::move(queue_.front()));
  queue_.pop_front();
  // Copies: `batch` grows below, which may move its first element.
  const std::string key = batch.front().job.batch_key;
  if (!key.empty() && batch.front().job.run_batch) {
    int64_t tokens = batch.front().job.batch_tokens;
    while (!queue_.empty() && queue_.front().job.batch_key == key &&
           tokens + queue_.front().job.batch_tokens <= batch_budget_) {
      tokens += queue_.front().job.batch_tokens;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  if (observer_ != nullptr) {
    observer_->OnQueueDepth(static_cast<int64_t>(queue_.size()));
  }
  return batch;
}

bool JobQueue::SkipIfStale(Queued& item, absl::Time now) {
  if (observer_ != nullptr) observer_->OnQueueWait(now - item.enqueued);
  absl::Status status =
      CallPart{0, item.job.deadline, item.job.cancelled}.StopStatus(
          now, "waiting in the queue");
  if (status.ok()) return false;
  if (observer_ != nullptr) {
    observer_->OnSkipped(absl::IsCancelled(status) ? "cancelled" : "deadline");
  }
  item.job.done(std::move(status));
  return true;
}

void JobQueue::Loop() {
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  };
  while (true) {
    std::vector<Queued> taken;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping and drained
      taken = TakeBatch();
    }
    const absl::Time start = absl::Now();
    std::vector<Queued*> live;
    for (Queued& item : taken) {
      if (!SkipIfStale(item, start)) live.push_back(&item);
    }
    if (live.empty()) continue;
    if (live.size() == 1 && !live.front()->job.run_batch) {
      Job& job = live.front()->job;
      CallControl control;
      control.deadline = job.deadline;
      control.cancelled = job.cancelled;
      absl::Status status = RunGuarded(job, control);
      if (observer_ != nullptr) observer_->OnRun(absl::Now() - start);
      job.done(std::move(status));
      continue;
    }
    // One model call for all: it may run until the latest deadline; a
    // member that gives up meanwhile is answered by its own caller's status.
    std::vector<Job*> jobs;
    absl::Time deadline = absl::InfinitePast();
    for (Queued* item : live) {
      jobs.push_back(&item->job);
      deadline = std::max(deadline, item->job.deadline);
    }
    CallControl control;
    control.deadline = deadline;
    control.cancelled = jobs.size() == 1 ? jobs.front()->cancelled : nullptr;
    std::vector<absl::Status> statuses = RunBatchGuarded(jobs, control);
    if (observer_ != nullptr) observer_->OnRun(absl::Now() - start);
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i]->done(std::move(statuses[i]));
    }
  }
}

}  // namespace mesa_anyjev::engine
