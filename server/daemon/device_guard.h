// The served backend behind a guard for the device: once a pass reports the
// device lost (server/engine/device_fault.h), `on_lost` runs once (the
// daemon stops serving and exits for its supervisor) and every later call
// fails at once with UNAVAILABLE instead of touching a dead CUDA context.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"

namespace mesa_anyjev::daemon {

class DeviceGuard final : public ForwardingBackend {
 public:
  DeviceGuard(std::unique_ptr<Backend> inner,
              std::function<void(const absl::Status&)> on_lost);

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override;
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;

 private:
  // UNAVAILABLE once the device is lost; OK before.
  absl::Status Refusal() const;
  // Notes a lost device (the first time only: on_lost once).
  void Watch(const absl::Status& status);

  std::unique_ptr<Backend> owned_;
  std::function<void(const absl::Status&)> on_lost_;
  mutable absl::Mutex mu_;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::daemon
