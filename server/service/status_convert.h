// The one place absl::Status becomes grpc::Status, so every RPC maps errors
// alike (docs/rpc.md).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace mesa_anyjev::service {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace mesa_anyjev::service
