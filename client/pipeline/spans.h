// How a pipeline run (decide --out) is cut into calls, the rule it shares
// with the Python client: by input position only. Span k holds states
// [k*S, (k+1)*S); all questions of a span go in one call (several, by
// question position, past what one call may carry); each call's batch prior
// comes from its own states. So a state's decisions depend only on its
// span's states, the questions, the level and the bundles served, never on
// concurrency, retries or where a run resumed (docs/cli.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/decision/decision.h"

namespace mesa_anyjev::client::pipeline {

// The span size refused (INVALID_ARGUMENT naming --span and the limit) when
// below 1 or above what one call may carry (`max_call_states`, 0: no limit).
absl::Status CheckSpanSize(int64_t span, int32_t max_call_states);

// The first state of the span holding state `index`.
int64_t SpanStart(int64_t index, int64_t span);

// Question positions [begin, end) per call: `n` questions in calls of at
// most `max` (0: one call).
std::vector<std::pair<size_t, size_t>> QuestionSlices(size_t n, int32_t max);

// The position in its call of the state an INVALID_ARGUMENT refusal names
// (the daemon's "states[3].text: ..."), or nullopt when it names none.
std::optional<size_t> RefusedState(const absl::Status& status);

// What one state of a span came to: a decision per question, or the
// daemon's refusal of it (its message naming the state by its position in
// the whole input).
struct StateResult {
  std::vector<decision::Decision> decisions;
  absl::Status refused;
};

// One call: the questions [q_begin, q_end) over `texts`, result[state][q].
using SpanCall =
    std::function<absl::StatusOr<std::vector<std::vector<decision::Decision>>>(
        const std::vector<std::string>& texts, size_t q_begin, size_t q_end)>;

// Decides one span whose first state is input position `first`: each slice
// of `n_questions` (at most `max_questions` a call) over its states. A state
// a call refuses (INVALID_ARGUMENT naming states[i]) is taken out of that
// call, which goes again without it; the other slices' calls keep it. Its
// result is the first refusal alone, renamed to its input position. Each
// call's batch prior thus comes from the states it decided, and the same
// span gives the same calls in every run. Any other failure is the span's.
absl::StatusOr<std::vector<StateResult>> DecideSpan(
    const std::vector<std::string>& texts, int64_t first, size_t n_questions,
    int32_t max_questions, const SpanCall& call);

}  // namespace mesa_anyjev::client::pipeline
