// What every Inference, Decisions and Bundles call passes before any work:
// the bearer token (UNAUTHENTICATED), the role its method needs
// (PERMISSION_DENIED), the priority class it asks for (INVALID_ARGUMENT for
// one that is not a class), then the daemon's state (loading and draining
// refuse with UNAVAILABLE); and the deadline the work runs under.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "server/metrics/metrics.h"
#include "server/service/serving_state.h"
#include "server/service/tenant_auth.h"

namespace mesa_anyjev::service {

// The checks a service's calls pass, for OpenCall (unary_call.h).
struct CallGate {
  const TenantAuth* auth;
  const ServingStateFlag* state;
};

// A call let in: who it is for, and the class its work runs at (what it
// asks, else its tenant's default, else interactive; never above the
// tenant's max_priority).
struct CallAdmission {
  CallerIdentity caller;
  Priority priority = Priority::kInteractive;
};

// The admission, or the refusal (counted in mesa_anyjev_rejected_total by
// reason and tenant). A class capped by the tenant's max_priority is
// counted in mesa_anyjev_priority_capped_total.
absl::StatusOr<CallAdmission> AdmitCall(
    const grpc::CallbackServerContext& context, metrics::Method method,
    const CallGate& gate, metrics::ServerMetrics* metrics);

// The caller's deadline cut to `max`, or now + `fallback` when it set none.
absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback, absl::Duration max);

}  // namespace mesa_anyjev::service
