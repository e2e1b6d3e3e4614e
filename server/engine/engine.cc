#include "server/engine/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status/retry_after.h"
#include "common/status/status_macros.h"
#include "server/model/device_fault.h"

namespace mesa_anyjev::engine {

Engine::Engine(EngineOptions options, EngineObserver* observer)
    : capacity_(options.limits.capacity),
      observer_(observer),
      held_(options.policy, options.limits, observer) {}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Engine::SetLoop(std::unique_ptr<WorkLoop> loop) {
  absl::MutexLock lock(&held_.mu());
  loop_ = std::move(loop);
}

void Engine::SetTenants(const std::vector<TenantShare>& tenants) {
  held_.SetTenants(tenants);
}

absl::Status Engine::Refusal() const {
  if (stopping_) {
    return WithRetryAfter(absl::UnavailableError("the daemon is draining"),
                          kDrainingRetryAfter);
  }
  if (!lost_.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the model's device failed in an earlier pass and the daemon is "
        "exiting for a restart (",
        lost_.message(), ")"));
  }
  return absl::OkStatus();
}

absl::Status Engine::TrySubmit(ForwardJob job) {
  const WorkLoop* loop = nullptr;
  {
    absl::MutexLock lock(&held_.mu());
    if (absl::Status refusal = Refusal(); !refusal.ok()) return refusal;
    loop = loop_.get();
  }
  // Outside the lock (it reads every token): the loop is set once, before
  // the daemon serves, and its check reads nothing that changes after.
  if (loop != nullptr) RETURN_IF_ERROR(loop->Check(job));
  // Admit takes the lock again: a drain begun in between refuses there.
  absl::MutexLock lock(&held_.mu());
  return held_.AdmitLocked(std::move(job), Refusal());
}

absl::StatusOr<ForwardOutput> Engine::SubmitAndWait(
    ForwardTask task, std::vector<PromptGroup> groups, Caller caller) {
  absl::Notification done;
  absl::StatusOr<ForwardOutput> out;
  ForwardJob job{std::move(task), std::move(groups), std::move(caller),
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

void Engine::Stop() {
  {
    absl::MutexLock lock(&held_.mu());
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Engine::AnswerAll(const absl::Status& status) {
  std::vector<HeldCall*> all;
  {
    absl::MutexLock lock(&held_.mu());
    all = held_.All();
  }
  for (HeldCall* call : all) held_.Answer(call, status);
}

void Engine::Loop() {
  Runner runner;
  while (true) {
    {
      absl::MutexLock lock(&held_.mu());
      const int64_t idle_at = runner.idle_at;
      const auto ready = [this,
                          idle_at]() ABSL_SHARED_LOCKS_REQUIRED(held_.mu()) {
        return (stopping_ && held_.empty()) ||
               (!held_.empty() && held_.admitted() != idle_at);
      };
      held_.mu().Await(absl::Condition(&ready));
      if (held_.empty()) return;  // stopping and drained
    }
    Turn(runner);
  }
}

void Engine::RunHere(const std::function<bool()>& done) {
  Runner runner;
  while (!done()) {
    {
      absl::MutexLock lock(&held_.mu());
      if (held_.empty()) return;
    }
    if (!Turn(runner)) return;
  }
}

bool Engine::Turn(Runner& runner) {
  WorkLoop* loop = nullptr;
  absl::Status refusal;
  {
    absl::MutexLock lock(&held_.mu());
    loop = loop_.get();
    if (!lost_.ok()) refusal = Refusal();
  }
  if (!refusal.ok()) {
    AnswerAll(refusal);
    return true;
  }
  if (loop == nullptr) {
    AnswerAll(absl::UnavailableError("no model loaded"));
    return true;
  }
  if (!runner.bound) {
    loop->Bind();
    runner.bound = true;
  }
  const absl::StatusOr<bool> ran = loop->Step(held_);
  if (!ran.ok()) {  // the device is lost: nothing more runs
    {
      absl::MutexLock lock(&held_.mu());
      lost_ = ran.status();
    }
    if (observer_ != nullptr) observer_->OnDeviceLost(ran.status());
    return true;
  }
  absl::MutexLock lock(&held_.mu());
  runner.idle_at = *ran ? -1 : held_.admitted();
  return *ran;
}

}  // namespace mesa_anyjev::engine
