#include "server/service/call_admission.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/auth/tenant.h"
#include "common/status/retry_after.h"
#include "common/status/status_macros.h"
#include "common/text/utf8.h"
#include "server/service/method_roles.h"

namespace mesa_anyjev::service {
namespace {

// The class the call's metadata asks for, if any.
absl::StatusOr<std::optional<Priority>> AskedPriority(
    const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(auth::kPriorityMetadata);
  if (it == metadata.end()) return std::nullopt;
  const std::string_view value(it->second.data(), it->second.size());
  if (const auto asked = PriorityNamed(value); asked.has_value()) {
    return asked;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("metadata ", auth::kPriorityMetadata, ": '",
                   text::Printable(value, 32), "' is not ", PriorityNames()));
}

absl::Status CheckServing(const ServingStateFlag& state,
                          metrics::ServerMetrics* metrics,
                          const std::string& tenant) {
  switch (state.get()) {
    case ServingState::kLoading:
      metrics->RecordRejected("loading", tenant);
      return WithRetryAfter(
          absl::UnavailableError("the model is still loading; retry later"),
          kLoadingRetryAfter);
    case ServingState::kDraining:
      metrics->RecordRejected("draining", tenant);
      return WithRetryAfter(
          absl::UnavailableError("the daemon is draining; retry elsewhere"),
          kDrainingRetryAfter);
    case ServingState::kServing:
      break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CallAdmission> AdmitCall(
    const grpc::CallbackServerContext& context, metrics::Method method,
    const CallGate& gate, metrics::ServerMetrics* metrics) {
  auto caller = gate.auth->Authenticate(context);
  if (!caller.ok()) {
    metrics->RecordRejected("unauthenticated", "");
    return caller.status();
  }
  const std::string tenant = caller->tenant_name();
  if (absl::Status allowed = Authorize(method, *caller); !allowed.ok()) {
    metrics->RecordRejected("permission_denied", tenant);
    return allowed;
  }
  const absl::StatusOr<std::optional<Priority>> asked = AskedPriority(context);
  if (!asked.ok()) {
    metrics->RecordRejected("invalid_priority", tenant);
    return asked.status();
  }
  CallAdmission admission{*std::move(caller),
                          asked->value_or(Priority::kInteractive)};
  if (const auth::Tenant* entry = admission.caller.tenant()) {
    admission.priority = entry->Resolve(*asked);
    if (entry->Caps(*asked)) metrics->RecordPriorityCapped(tenant);
  }
  RETURN_IF_ERROR(CheckServing(*gate.state, metrics, tenant));
  return admission;
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
