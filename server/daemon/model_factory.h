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

namespace mesa_anyjev::daemon {

// Before the daemon binds: model.path is "fake" or a directory holding a
// checkpoint's config.json and its weights (model.safetensors or the
// index); INVALID_ARGUMENT naming what is missing. The full check is the
// load's.
absl::Status CheckModelPath(const config::Config& config);

// The model the daemon serves: the Backend the services read (tokenizer,
// capabilities) and what the job queue runs merged calls on, the backend
// itself when it is a ForwardModel (the Qwen3 backend), else `adapter`
// over it.
struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<engine::ForwardModel> adapter;
  engine::ForwardModel* forward = nullptr;
};

// Returns early with CANCELLED when `stop` is notified during the load.
// `observer` (may be null) hears about the model's batches and caches;
// `gateway` (may be null) about a router's gateway calls. `faults` (tests
// only) arms a checkpoint model's passes to fail as a device would; the
// fake and composite backends refuse it (INVALID_ARGUMENT).
absl::StatusOr<LoadedModel> LoadModel(
    const config::Config& config, engine::EngineObserver* observer,
    gateway::GatewayObserver* gateway, const absl::Notification& stop,
    const std::optional<engine::FaultPlan>& faults = std::nullopt);

}  // namespace mesa_anyjev::daemon
