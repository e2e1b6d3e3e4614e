// The decision workers (see decision_workers.h).
#include "server/service/decision_workers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/retry_after.h"

namespace mesa_anyjev::service {

DecisionWorkers::DecisionWorkers(int32_t threads, int32_t capacity, bool fair)
    : capacity_(capacity), fair_(fair) {
  for (size_t priority = 0; priority < (fair ? kClasses : 1); ++priority) {
    for (int32_t i = 0; i < threads; ++i) {
      threads_.emplace_back([this, priority] { Loop(priority); });
    }
  }
}

DecisionWorkers::~DecisionWorkers() { Stop(); }

absl::Status DecisionWorkers::TrySubmit(Owner owner,
                                        std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return WithRetryAfter(
        absl::UnavailableError("the daemon is draining; retry elsewhere"),
        kDrainingRetryAfter);
  }
  size_t waiting = 0;
  for (const auto& queue : waiting_) waiting += queue.size();
  if (static_cast<int64_t>(waiting) >= capacity_) {
    return WithRetryAfter(
        absl::ResourceExhaustedError(
            absl::StrCat("decision queue full (", capacity_,
                         " calls waiting for a decision worker); retry later")),
        kQueueFullRetryAfter);
  }
  const size_t priority = fair_ ? static_cast<size_t>(owner.priority) : 0;
  waiting_[priority].push_back({std::move(owner), std::move(task)});
  return absl::OkStatus();
}

void DecisionWorkers::Stop() {
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

bool DecisionWorkers::Ready(size_t priority) const {
  return stopping_ || !waiting_[priority].empty();
}

bool DecisionWorkers::Mine::Ready(const Mine* mine) {
  // Called by Await under mu_.
  return mine->workers->Ready(mine->priority);
}

size_t DecisionWorkers::NextLocked(size_t priority) const {
  if (!fair_) return 0;
  const std::deque<Waiting>& queue = waiting_[priority];
  size_t best = 0;
  double best_load = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const auto it = running_.find({priority, queue[i].owner.tenant});
    const int32_t running = it == running_.end() ? 0 : it->second;
    const double load = running / queue[i].owner.weight;
    // Strictly less: among equals the older (earlier) call.
    if (i == 0 || load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

void DecisionWorkers::Loop(size_t priority) {
  for (;;) {
    Waiting next;
    {
      absl::MutexLock lock(&mu_);
      const Mine mine{this, priority};
      mu_.Await(absl::Condition(&Mine::Ready, &mine));
      std::deque<Waiting>& queue = waiting_[priority];
      if (queue.empty()) return;  // stopping, nothing left
      const size_t at = NextLocked(priority);
      next = std::move(queue[at]);
      queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(at));
      ++running_[{priority, next.owner.tenant}];
    }
    next.task();
    absl::MutexLock lock(&mu_);
    const auto it = running_.find({priority, next.owner.tenant});
    if (--it->second == 0) running_.erase(it);
  }
}

}  // namespace mesa_anyjev::service
