#include "server/service/call_admission.h"

#include <algorithm>
#include <chrono>

#include "common/status/retry_after.h"

namespace mesa_anyjev::service {

absl::Status AdmitCall(const grpc::CallbackServerContext& context,
                       const BearerAuth& auth, const ServingStateFlag& state,
                       metrics::ServerMetrics* metrics) {
  if (absl::Status status = auth.Check(context); !status.ok()) {
    metrics->RecordRejected("unauthenticated");
    return status;
  }
  switch (state.get()) {
    case ServingState::kLoading:
      metrics->RecordRejected("loading");
      return WithRetryAfter(
          absl::UnavailableError("the model is still loading; retry later"),
          kLoadingRetryAfter);
    case ServingState::kDraining:
      metrics->RecordRejected("draining");
      return WithRetryAfter(
          absl::UnavailableError("the daemon is draining; retry elsewhere"),
          kDrainingRetryAfter);
    case ServingState::kServing:
      break;
  }
  return absl::OkStatus();
}

absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback, absl::Duration max) {
  const absl::Time now = absl::Now();
  const auto client = context.deadline();
  if (client == std::chrono::system_clock::time_point::max()) {
    return now + fallback;  // the caller set none
  }
  return std::min(absl::FromChrono(client), now + max);
}

}  // namespace mesa_anyjev::service
