// The model the job queue runs, behind a guard for the device: once a pass
// reports the device lost (server/engine/device_fault.h), `on_lost` runs
// once (the daemon stops serving and exits for its supervisor) and every
// later call fails at once with UNAVAILABLE instead of touching a dead CUDA
// context. Every forward the daemon serves goes through the queue, so the
// guard wraps the queue's ForwardModel.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/forward_call.h"

namespace mesa_anyjev::daemon {

class DeviceGuard final : public engine::ForwardModel {
 public:
  // `inner` outlives the guard.
  DeviceGuard(engine::ForwardModel* inner,
              std::function<void(const absl::Status&)> on_lost);

  absl::StatusOr<engine::ForwardOutput> Run(
      const engine::ForwardCall& call) override;

 private:
  // UNAVAILABLE once the device is lost; OK before.
  absl::Status Refusal() const;
  // Notes a lost device (the first time only: on_lost once).
  void Watch(const absl::Status& status);

  engine::ForwardModel* const inner_;
  std::function<void(const absl::Status&)> on_lost_;
  mutable absl::Mutex mu_;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::daemon
