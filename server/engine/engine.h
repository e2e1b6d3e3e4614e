// The engine: the one thread that drives the model, and the calls it holds
// (held_calls.h) in the scheduler's order (scheduler.h). Callers submit
// typed forward jobs and return at once; the engine thread runs them a unit
// of work at a time (work_loop.h: a full forward pass over the model
// runner, or one merged call over a Backend-only model), so an interactive
// call waits for at most the pass in flight. A call whose deadline passed
// or whose caller cancelled is answered without running. A device that is
// lost ends the engine's service: every call from then on is refused, and
// the observer hears it once (the daemon exits for a fresh process).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/engine_observer.h"
#include "server/engine/held_calls.h"
#include "server/engine/scheduler.h"
#include "server/engine/work_loop.h"

namespace mesa_anyjev::engine {

struct EngineOptions {
  SchedulerPolicy policy = SchedulerPolicy::kFair;
  SchedulerLimits limits;
};

class Engine {
 public:
  // `observer` (may be null) outlives the engine.
  Engine(EngineOptions options, EngineObserver* observer);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void Start();
  // The work the calls run as, once the model is loaded; calls held
  // before are answered UNAVAILABLE ("no model loaded").
  void SetLoop(std::unique_ptr<WorkLoop> loop);
  // The tenants' weights and limits (on load and on every reload).
  void SetTenants(const std::vector<TenantShare>& tenants);

  // Holds the job, or refuses it at once: the model's check of it
  // (INVALID_ARGUMENT, RESOURCE_EXHAUSTED), a limit (RESOURCE_EXHAUSTED
  // naming it), a draining engine or a lost device (UNAVAILABLE). Never
  // blocks the caller; on refusal the job's `done` is NOT called.
  absl::Status TrySubmit(ForwardJob job);
  // For a caller with a thread of its own to block (a decision worker, the
  // warm-up): submits the job and waits for its output.
  absl::StatusOr<ForwardOutput> SubmitAndWait(ForwardTask task,
                                              std::vector<PromptGroup> groups,
                                              Caller caller);
  // Finishes every held job (running or dropping it), then joins.
  void Stop();

  // An engine never started runs its work on the calling thread instead,
  // until `done` says so or nothing more can run: a tool that profiles the
  // passes from the thread that runs them (tests/tools/qwen3_dump.cc), as
  // the engine thread would.
  void RunHere(const std::function<bool()>& done);

  int64_t depth() const { return held_.size(); }
  int32_t capacity() const { return capacity_; }

 private:
  // What one thread running the engine's work keeps between turns.
  struct Runner {
    bool bound = false;    // the loop was bound to this thread
    int64_t idle_at = -1;  // admissions seen when a turn found nothing to run
  };
  void Loop();
  // One unit of work (or the answers of calls that cannot run); whether it
  // ran a unit.
  bool Turn(Runner& runner);
  // Answers every held call with `status`.
  void AnswerAll(const absl::Status& status);
  absl::Status Refusal() const ABSL_SHARED_LOCKS_REQUIRED(held_.mu());

  const int32_t capacity_;
  EngineObserver* const observer_;
  HeldCalls held_;
  std::unique_ptr<WorkLoop> loop_ ABSL_GUARDED_BY(held_.mu());
  bool stopping_ ABSL_GUARDED_BY(held_.mu()) = false;
  absl::Status lost_ ABSL_GUARDED_BY(held_.mu());
  std::thread thread_;
};

}  // namespace mesa_anyjev::engine
