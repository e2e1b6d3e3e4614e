#include "server/engine/backend_forward_model.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace mesa_anyjev::engine {

// Raises its flag once every member of the call it watches has stopped.
// The callers' cancel flags are plain atomics that notify nobody, so it
// looks every millisecond while a call is watched, as the fake model's own
// wait does, and sleeps otherwise. One thread for the adapter's life: a
// merged call costs a wake-up, not a thread.
class BackendForwardModel::StopWatch {
 public:
  StopWatch() : thread_([this] { Loop(); }) {}
  ~StopWatch() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  StopWatch(const StopWatch&) = delete;
  StopWatch& operator=(const StopWatch&) = delete;

  // Watches `call` (on the engine thread, until Release) with the flag down.
  const std::atomic<bool>* Watch(const ForwardCall* call) {
    absl::MutexLock lock(&mu_);
    stopped_.store(false);
    call_ = call;
    return &stopped_;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    call_ = nullptr;
  }

 private:
  void Loop() {
    absl::MutexLock lock(&mu_);
    const auto watching = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return done_ || call_ != nullptr;
    };
    while (!done_) {
      if (call_ == nullptr) {
        mu_.Await(absl::Condition(&watching));
        continue;
      }
      if (call_->ShouldStop(absl::Now())) stopped_.store(true);
      mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(1));
    }
  }

  absl::Mutex mu_;
  const ForwardCall* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stopped_{false};
  std::thread thread_;  // last: starts once the rest is built
};

BackendForwardModel::BackendForwardModel(Backend* backend)
    : backend_(backend), watch_(std::make_unique<StopWatch>()) {}

BackendForwardModel::~BackendForwardModel() = default;

absl::StatusOr<ForwardOutput> BackendForwardModel::Run(
    const ForwardCall& call) {
  if (call.members.size() == 1) {
    const ForwardMember& member = call.members.front();
    CallControl control;
    control.deadline = member.caller.deadline;
    control.cancelled = member.caller.cancelled;
    return RunGroups(*member.groups, call.task, control);
  }
  std::vector<PromptGroup> groups;
  CallControl control;
  control.deadline = absl::InfinitePast();
  for (const ForwardMember& member : call.members) {
    groups.insert(groups.end(), member.groups->begin(), member.groups->end());
    control.deadline = std::max(control.deadline, member.caller.deadline);
  }
  control.cancelled = watch_->Watch(&call);
  absl::StatusOr<ForwardOutput> out;
  {
    // Released however RunGroups ends (model code may throw).
    const absl::Cleanup release = [this] { watch_->Release(); };
    out = RunGroups(groups, call.task, control);
  }
  // Stopped because every member did: the merged call's own status.
  if (const absl::Time now = absl::Now(); !out.ok() && call.ShouldStop(now)) {
    return call.StopStatus(now, "the forward");
  }
  return out;
}

absl::StatusOr<ForwardOutput> BackendForwardModel::RunGroups(
    const std::vector<PromptGroup>& groups, const ForwardTask& task,
    const CallControl& control) {
  return RunTask(
      task,
      [&](int32_t top_k) { return backend_->Logprobs(groups, top_k, control); },
      [&](const std::vector<int32_t>& layers) {
        return backend_->HiddenStates(groups, layers, control);
      });
}

}  // namespace mesa_anyjev::engine
