// A refusal that a caller may retry carries how long to wait first: the
// daemon sets it where it refuses (a full queue, busy decision workers,
// loading, draining) and sends it as the gRPC trailer
// `grpc-retry-pushback-ms` (docs/rpc.md), which the client's retry rule and
// any stock gRPC retry policy honour. A status without it is one that
// waiting cannot fix.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace mesa_anyjev {

// The daemon's pushbacks: a queue frees a slot within a pass or two; a
// draining daemon is gone for good (another one, or its restart, answers
// the retry); a loading one takes seconds.
inline constexpr absl::Duration kQueueFullRetryAfter = absl::Milliseconds(100);
inline constexpr absl::Duration kDrainingRetryAfter = absl::Milliseconds(500);
inline constexpr absl::Duration kLoadingRetryAfter = absl::Milliseconds(1000);

// `status` with the wait attached (an OK status stays OK, untouched).
absl::Status WithRetryAfter(absl::Status status, absl::Duration after);

// The wait attached to `status`, if any.
std::optional<absl::Duration> RetryAfter(const absl::Status& status);

}  // namespace mesa_anyjev
