// What the engine's queue hands the model: one forward call, the merged work
// of one caller or of several whose compatible calls queued behind each
// other, as one value (what to compute; per member its prompt groups,
// deadline and cancel flag), and the interface a model runs it through.
// Nothing in a call points back at its callers' code.
#pragma once

#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/backend.h"

namespace mesa_anyjev::engine {

// Logprobs at each prompt's last position: the group's label ids and the
// top_k most likely tokens (Backend::Logprobs).
struct LogprobsTask {
  int32_t top_k = 0;
  bool operator==(const LogprobsTask&) const = default;
};

// The residual stream at each prompt's last position after these layers
// (Backend::HiddenStates).
struct HiddenStatesTask {
  std::vector<int32_t> layers;
  bool operator==(const HiddenStatesTask&) const = default;
};

// Calls with equal tasks may run as one.
using ForwardTask = std::variant<LogprobsTask, HiddenStatesTask>;

// Logprobs: one entry per group, one per suffix.
using GroupLogprobs = std::vector<std::vector<PromptLogprobs>>;

// What a task computes: GroupLogprobs for a LogprobsTask, HiddenStatesResult
// for a HiddenStatesTask.
using ForwardOutput = std::variant<GroupLogprobs, HiddenStatesResult>;

// One caller's share of a call.
struct ForwardMember {
  const std::vector<PromptGroup>* groups = nullptr;  // outlives the call
  Caller caller;
};

struct ForwardCall {
  ForwardTask task;
  // In arrival order; the call's groups are theirs, in this order.
  std::vector<ForwardMember> members;

  // Once every member has stopped nobody needs the rest, so the whole call
  // stops (a drain relies on it: gRPC cancels every call at once).
  bool ShouldStop(absl::Time now) const;
  // A lone member's own Caller::StopStatus; for several, once every one has
  // stopped, DEADLINE_EXCEEDED when all ran out of time and CANCELLED
  // otherwise. OK before ShouldStop.
  absl::Status StopStatus(absl::Time now, const char* where) const;
  // Every member's groups, in order.
  std::vector<const PromptGroup*> Groups() const;
};

// Each member's share of `output`, the output of `call` (rows for every
// member's groups, in order); INTERNAL when `output` does not hold the
// call's task's kind or covers other groups than the call's.
absl::StatusOr<std::vector<ForwardOutput>> SplitOutput(const ForwardCall& call,
                                                       ForwardOutput output);

// The output of a call or job whose task computes `Output` (GroupLogprobs
// or HiddenStatesResult).
template <typename Output>
absl::StatusOr<Output> OutputAs(absl::StatusOr<ForwardOutput> out) {
  if (!out.ok()) return out.status();
  if (Output* value = std::get_if<Output>(&*out)) return std::move(*value);
  return absl::InternalError("the model answered with another kind of output");
}

// What `task` names, as a ForwardOutput: `logprobs(top_k)` or
// `hidden_states(layers)`.
template <typename Logprobs, typename HiddenStates>
absl::StatusOr<ForwardOutput> RunTask(const ForwardTask& task,
                                      Logprobs logprobs,
                                      HiddenStates hidden_states) {
  if (const auto* asked = std::get_if<LogprobsTask>(&task)) {
    absl::StatusOr<GroupLogprobs> rows = logprobs(asked->top_k);
    if (!rows.ok()) return rows.status();
    return ForwardOutput(*std::move(rows));
  }
  absl::StatusOr<HiddenStatesResult> hidden =
      hidden_states(std::get<HiddenStatesTask>(task).layers);
  if (!hidden.ok()) return hidden.status();
  return ForwardOutput(*std::move(hidden));
}

// The model the engine thread runs calls on: the Qwen3 backend itself, or
// BackendForwardModel over any other Backend.
class ForwardModel {
 public:
  virtual ~ForwardModel() = default;

  // Runs every member's groups as one call and returns what the task
  // computes for all of them, in order. A member found stopped may be left
  // out of the work (its rows are then unspecified: the queue answers it
  // with its own status); the call ends early once ShouldStop, with its
  // StopStatus. Engine thread only.
  virtual absl::StatusOr<ForwardOutput> Run(const ForwardCall& call) = 0;
};

}  // namespace mesa_anyjev::engine
