// The engine's work on a model runner: one full forward pass per step,
// planned from every held call in the scheduler's order (interactive work
// first, tenants in fair shares, each call's groups in prefix order) up to
// the token budget, over the KV blocks the engine keeps; the pass's output
// rows go to their calls, and each call is answered once its last row is
// in. A call found stopped is dropped alone; a pass that fails ends the
// calls that had work in it (a lost device, every call: the engine stops
// serving). No libtorch here: passes cross to the runner as
// model::PassPlan and come back as model::PassOutput.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "server/engine/engine_observer.h"
#include "server/engine/fault_plan.h"
#include "server/engine/kv_blocks.h"
#include "server/engine/pass_planner.h"
#include "server/engine/work_loop.h"
#include "server/model/model_runner.h"

namespace mesa_anyjev::engine {

struct PassLoopOptions {
  model::KvGeometry kv;         // the runner's pool
  bool prefix_caching = true;   // engine.prefix_caching
  int64_t batch_tokens = 8192;  // engine.batch_tokens: new tokens a pass
  // engine.interactive_pass_tokens: a pass planned while interactive work
  // is held beside batch work, at most (0: batch_tokens)
  int64_t interactive_pass_tokens = 0;
  // engine.short_passes_after_interactive: passes led by batch work after
  // such a pass that keep its budget
  int32_t short_passes_after_interactive = 0;
  int32_t n_layers = 0;
  int32_t hidden_size = 0;
  int32_t vocab_size = 0;
  std::optional<FaultPlan> faults;  // tests only (--inject-faults)
};

class PassLoop final : public WorkLoop {
 public:
  // `runner` and `observer` (may be null) outlive the loop.
  PassLoop(model::PassRunner* runner, PassLoopOptions options,
           EngineObserver* observer);
  ~PassLoop() override;

  void Bind() override { runner_->BindThread(); }
  absl::Status Check(const ForwardJob& job) const override;
  absl::StatusOr<bool> Step(HeldCalls& calls) override;

 private:
  struct Active;
  struct Planned;
  // Calls found stopped are answered; a started one's work is dropped.
  void Sweep(HeldCalls& calls);
  // The engine waits for a hold's file (the fault plan) before the pass.
  void HoldIfPlanned();
  // The next pass from the held calls, nullopt when nothing is left to
  // plan; the calls the planner refused are answered.
  std::optional<Planned> Plan(HeldCalls& calls);
  Active& ActiveOf(HeldCall& call);
  // The pass's reading and each row's labels, from its calls' task.
  void Read(const ForwardTask& task, Planned& planned);
  // What a pass's rows give their calls; the calls it completes answered.
  void Deliver(HeldCalls& calls, Planned& planned,
               const model::PassOutput& out);
  // The calls with work in a failed pass are answered with `status`.
  void Fail(HeldCalls& calls, Planned& planned, const absl::Status& status);
  void Report(const Planned& planned, absl::Duration took, int64_t evictions);

  model::PassRunner* const runner_;
  PassLoopOptions options_;
  EngineObserver* const observer_;
  KvBlocks blocks_;
  PassPlanner planner_;
  int64_t passes_ = 0;
  // Short passes still owed to interactive callers' next questions.
  int32_t short_passes_left_ = 0;
  PlanStats reported_;  // the planner's counts as last reported
  // The calls whose work has begun, by id (engine thread only).
  absl::flat_hash_map<Scheduler::JobId, std::unique_ptr<Active>> active_;
};

}  // namespace mesa_anyjev::engine
