#include "server/daemon/device_guard.h"

#include "absl/strings/str_cat.h"
#include "server/engine/device_fault.h"

namespace mesa_anyjev::daemon {

DeviceGuard::DeviceGuard(std::unique_ptr<Backend> inner,
                         std::function<void(const absl::Status&)> on_lost)
    : ForwardingBackend(inner.get()),
      owned_(std::move(inner)),
      on_lost_(std::move(on_lost)) {}

absl::Status DeviceGuard::Refusal() const {
  absl::MutexLock lock(&mu_);
  if (lost_.ok()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the model's device failed in an earlier pass and the daemon is "
      "exiting for a restart (",
      lost_.message(), ")"));
}

void DeviceGuard::Watch(const absl::Status& status) {
  if (!engine::IsDeviceLost(status)) return;
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.ok()) return;
    lost_ = status;
  }
  on_lost_(status);
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> DeviceGuard::Logprobs(
    const std::vector<PromptGroup>& groups, int32_t top_k,
    const CallControl& control) {
  if (absl::Status refused = Refusal(); !refused.ok()) return refused;
  auto result = ForwardingBackend::Logprobs(groups, top_k, control);
  Watch(result.status());
  return result;
}

absl::StatusOr<HiddenStatesResult> DeviceGuard::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  if (absl::Status refused = Refusal(); !refused.ok()) return refused;
  auto result = ForwardingBackend::HiddenStates(groups, layers, control);
  Watch(result.status());
  return result;
}

}  // namespace mesa_anyjev::daemon
