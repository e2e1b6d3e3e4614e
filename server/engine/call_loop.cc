#include "server/engine/call_loop.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace mesa_anyjev::engine {

CallLoop::CallLoop(ForwardModel* model, int64_t budget,
                   EngineObserver* observer)
    : model_(model), budget_(budget), observer_(observer) {}

absl::StatusOr<bool> CallLoop::Step(HeldCalls& calls) {
  std::vector<HeldCall*> merged;
  std::vector<HeldCall*> stale;
  PassRecord record;
  {
    absl::MutexLock lock(&calls.mu());
    stale = calls.Stale(absl::Now());
    const auto fresh = [&](const HeldCall& c) {
      return std::find(stale.begin(), stale.end(), &c) == stale.end();
    };
    HeldCall* call = calls.Next(fresh);
    int64_t tokens = 0;
    while (call != nullptr) {
      merged.push_back(call);
      tokens += call->tokens;
      calls.Charge(*call, call->tokens);
      record.shares.push_back(
          {call->job.caller.tenant, call->job.caller.priority, call->tokens});
      call = calls.Next([&](const HeldCall& c) {
        return fresh(c) && c.job.task == merged.front()->job.task &&
               std::find(merged.begin(), merged.end(), &c) == merged.end() &&
               tokens + c.tokens <= budget_;
      });
    }
    record.tokens = tokens;
  }
  const absl::Time now = absl::Now();
  for (HeldCall* call : stale) calls.AnswerStopped(call, now);
  if (merged.empty()) return !stale.empty();
  ForwardCall call{merged.front()->job.task, {}};
  for (const HeldCall* held : merged) {
    call.members.push_back({&held->job.groups, held->job.caller});
    record.segments += static_cast<int64_t>(held->job.groups.size());
    for (const PromptGroup& g : held->job.groups) {
      record.rows += static_cast<int64_t>(g.suffixes.size());
    }
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<ForwardOutput> out;
  // Model code may throw; exceptions stop here, once, and become INTERNAL.
  try {
    out = model_->Run(call);
  } catch (const std::exception& e) {
    out = absl::InternalError(absl::StrCat("model error: ", e.what()));
  }
  record.number = ++calls_run_;
  record.took = absl::Now() - start;
  if (observer_ != nullptr) observer_->OnPass(record);
  absl::StatusOr<std::vector<ForwardOutput>> shares =
      out.ok() ? SplitOutput(call, *std::move(out))
               : absl::StatusOr<std::vector<ForwardOutput>>(out.status());
  for (size_t i = 0; i < merged.size(); ++i) {
    // A member whose caller stopped while the merged call ran gets its own
    // status, not the (partial) results; a lone caller gets the model's.
    if (merged.size() > 1 && merged[i]->job.caller.ShouldStop(absl::Now())) {
      calls.AnswerStopped(merged[i], absl::Now());
    } else if (!shares.ok()) {
      calls.Answer(merged[i], shares.status());
    } else {
      calls.Answer(merged[i], std::move((*shares)[i]));
    }
  }
  return true;
}

}  // namespace mesa_anyjev::engine
