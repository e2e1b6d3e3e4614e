// Builds the backend mesa-anyjevd serves: from model.path, "fake" (the
// synthetic CI model) or a checkpoint directory; or, with model.backend
// composite, the router's gateway + remote-daemon backend.
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/gateway/gateway_backend.h"
#include "server/engine/engine_observer.h"
#include "server/engine/fault_plan.h"
#include "server/engine/forward_call.h"
#include "server/engine/queued_backend.h"
#include "server/engine/work_loop.h"

namespace mesa_anyjev::daemon {

// Before the daemon binds: model.path is "fake" or a directory holding a
// checkpoint's config.json and its weights (model.safetensors or the
// index); INVALID_ARGUMENT naming what is missing. The full check is the
// load's.
absl::Status CheckModelPath(const config::Config& config);

// The model the daemon serves, loaded: what it is (a model with the
// Backend seam and the engine's adapter over it, or a checkpoint and its
// runner), the facts the services read (ServedModel), and the work loop the
// engine runs calls on (a call loop, or a pass loop over the runner).
struct LoadedModel {
  std::unique_ptr<Backend> backend;               // the fake, the composite
  std::unique_ptr<engine::ForwardModel> adapter;  // over `backend`
  std::shared_ptr<void> checkpoint;               // engine::CheckpointModel
  engine::ServedModel served;
  std::unique_ptr<engine::WorkLoop> loop;
};

// Returns early with CANCELLED when `stop` is notified during the load.
// `observer` (may be null) hears about the engine's passes and caches;
// `gateway` (may be null) about a router's gateway calls. `faults` (tests
// only) arms a checkpoint model's passes to fail as a device would, or the
// engine to hold; the fake and composite backends refuse it
// (INVALID_ARGUMENT). The start log's lines about the model are written
// here.
absl::StatusOr<LoadedModel> LoadModel(
    const config::Config& config, engine::EngineObserver* observer,
    gateway::GatewayObserver* gateway, const absl::Notification& stop,
    const std::optional<engine::FaultPlan>& faults = std::nullopt);

}  // namespace mesa_anyjev::daemon
