// Builds the backend mesa-anyjevd serves from model.path: "fake" (the
// synthetic CI model) or a checkpoint directory.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/backend.h"
#include "common/config/config.h"

namespace mesa_anyjev::daemon {

// Returns early with CANCELLED when `stop` is notified during the load.
absl::StatusOr<std::unique_ptr<Backend>> LoadModel(
    const config::ModelConfig& model, const absl::Notification& stop);

}  // namespace mesa_anyjev::daemon
