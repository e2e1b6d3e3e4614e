// Builds the backend mesa-anyjevd serves from model.path: "fake" (the
// synthetic CI model) or a checkpoint directory.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "server/engine/engine_observer.h"

namespace mesa_anyjev::daemon {

// Returns early with CANCELLED when `stop` is notified during the load.
// `observer` (may be null) hears about the model's batches and caches.
absl::StatusOr<std::unique_ptr<Backend>> LoadModel(
    const config::ModelConfig& model, const config::EngineConfig& engine,
    engine::EngineObserver* observer, const absl::Notification& stop);

}  // namespace mesa_anyjev::daemon
