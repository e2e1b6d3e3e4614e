// The one way to open a channel to mesa-anyjevd, for the CLI
// (client/backends/daemon_client) and for a daemon in router mode
// (server/service/remote_hidden_states): client.address parsed (one daemon,
// a list or a resolver name, balanced with health: common/util/
// daemon_target.h), TLS when client.tls_ca is set, no cap on what is
// received (the daemon caps what it sends). No protobuf types: beside the
// contract because both sides of it dial the daemon.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/status/statusor.h"
#include "common/config/config.h"

namespace mesa_anyjev {

// INVALID_ARGUMENT naming client.address or client.tls_ca: an unreadable CA
// file, or one without a PEM certificate (gRPC would only log its refusal
// and then fail every call as "empty address list").
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenDaemonChannel(
    const config::ClientConfig& client);

}  // namespace mesa_anyjev
