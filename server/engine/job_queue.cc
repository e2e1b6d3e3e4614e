#include "server/engine/job_queue.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status/retry_after.h"

namespace mesa_anyjev::engine {
namespace {

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

// Model code may throw (libtorch reports errors as c10::Error); exceptions
// stop here, once, and become INTERNAL for the callers.
absl::StatusOr<ForwardOutput> RunGuarded(ForwardModel* model,
                                         const ForwardCall& call) {
  if (model == nullptr) return absl::UnavailableError("no model loaded");
  try {
    return model->Run(call);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model error: ", e.what()));
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

absl::Status JobQueue::TrySubmit(ForwardJob job) {
  const int64_t tokens = TokensOf(job.groups);
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
    queue_.push_back(Queued{std::move(job), absl::Now(), tokens});
    // Under the lock, so the gauge can never end on a stale value.
    if (observer_ != nullptr) {
      observer_->OnQueueDepth(static_cast<int64_t>(queue_.size()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ForwardOutput> JobQueue::SubmitAndWait(
    ForwardTask task, std::vector<PromptGroup> groups, Caller caller) {
  absl::Notification done;
  absl::StatusOr<ForwardOutput> out;
  ForwardJob job{std::move(task), std::move(groups), caller,
                 [&](absl::StatusOr<ForwardOutput> result) {
                   out = std::move(result);
                   done.Notify();
                 }};
  // On refusal `done` is never called: answer here.
  if (absl::Status status = TrySubmit(std::move(job)); !status.ok()) {
    return status;
  }
  done.WaitForNotification();
  return out;
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
  int64_t tokens = batch.front().tokens;
  while (!queue_.empty() && queue_.front().job.task == batch.front().job.task &&
         tokens + queue_.front().tokens <= batch_budget_) {
    tokens += queue_.front().tokens;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (observer_ != nullptr) {
    observer_->OnQueueDepth(static_cast<int64_t>(queue_.size()));
  }
  return batch;
}

bool JobQueue::SkipIfStale(Queued& item, absl::Time now) {
  if (observer_ != nullptr) observer_->OnQueueWait(now - item.enqueued);
  absl::Status status = item.job.caller.StopStatus(now, "waiting in the queue");
  if (status.ok()) return false;
  if (observer_ != nullptr) {
    observer_->OnSkipped(absl::IsCancelled(status) ? "cancelled" : "deadline");
  }
  item.job.done(std::move(status));
  return true;
}

void JobQueue::RunMerged(const std::vector<Queued*>& live, absl::Time start) {
  ForwardCall call{live.front()->job.task, {}};
  for (const Queued* item : live) {
    call.members.push_back({&item->job.groups, item->job.caller});
  }
  absl::StatusOr<ForwardOutput> out = RunGuarded(model_.load(), call);
  if (observer_ != nullptr) observer_->OnRun(absl::Now() - start);
  absl::StatusOr<std::vector<ForwardOutput>> shares =
      out.ok() ? SplitOutput(call, *std::move(out))
               : absl::StatusOr<std::vector<ForwardOutput>>(out.status());
  for (size_t i = 0; i < live.size(); ++i) {
    ForwardJob& job = live[i]->job;
    // A member whose caller stopped while the merged call ran gets its own
    // status, not the (partial) results; a lone caller gets the model's.
    if (absl::Status stopped =
            job.caller.StopStatus(absl::Now(), "the forward");
        live.size() > 1 && !stopped.ok()) {
      job.done(std::move(stopped));
    } else if (!shares.ok()) {
      job.done(shares.status());
    } else {
      job.done(std::move((*shares)[i]));
    }
  }
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
    if (!live.empty()) RunMerged(live, start);
  }
}

}  // namespace mesa_anyjev::engine
