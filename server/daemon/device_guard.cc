#include "server/daemon/device_guard.h"

#include "absl/strings/str_cat.h"
#include "server/engine/device_fault.h"

namespace mesa_anyjev::daemon {

DeviceGuard::DeviceGuard(engine::ForwardModel* inner,
                         std::function<void(const absl::Status&)> on_lost)
    : inner_(inner), on_lost_(std::move(on_lost)) {}

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

absl::StatusOr<engine::ForwardOutput> DeviceGuard::Run(
    const engine::ForwardCall& call) {
  if (absl::Status refused = Refusal(); !refused.ok()) return refused;
  absl::StatusOr<engine::ForwardOutput> out = inner_->Run(call);
  Watch(out.status());
  return out;
}

}  // namespace mesa_anyjev::daemon
