// The role each RPC needs (docs/rpc.md, "Roles"): decide reads the model and
// what it serves, learn also changes what is learned, admin also changes
// what is served. Health and reflection are open and never come here.
#pragma once

#include "absl/status/status.h"
#include "common/auth/tenant.h"
#include "server/metrics/metrics.h"
#include "server/service/tenant_auth.h"

namespace mesa_anyjev::service {

auth::Role RequiredRole(metrics::Method method);

// OK, or PERMISSION_DENIED naming the method, the tenant and the role it
// needs.
absl::Status Authorize(metrics::Method method, const CallerIdentity& caller);

}  // namespace mesa_anyjev::service
