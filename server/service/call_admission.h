// What every Inference and Decisions call passes before any work: the bearer
// token, then the daemon's state (loading and draining refuse with
// UNAVAILABLE); and the deadline the work runs under.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/metrics/metrics.h"
#include "server/service/bearer_auth.h"
#include "server/service/serving_state.h"

namespace mesa_anyjev::service {

// OK, or the refusal (counted in mesa_anyjev_rejected_total by reason).
absl::Status AdmitCall(const grpc::CallbackServerContext& context,
                       const BearerAuth& auth, const ServingStateFlag& state,
                       metrics::ServerMetrics* metrics);

// The caller's deadline cut to `max`, or now + `fallback` when it set none.
absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback, absl::Duration max);

}  // namespace mesa_anyjev::service
