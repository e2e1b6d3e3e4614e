// Where the CLI (and a router) finds mesa-anyjevd: one host:port, a comma
// list of IP:port (several daemons), or a gRPC name such as
// dns:///gpu-hosts.internal:50151 that resolves to several. Several daemons
// are balanced by gRPC's own round_robin, which skips daemons whose health
// says NOT_SERVING (loading or draining) and retries UNAVAILABLE once on
// another daemon, so stopping one does not fail a run.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace mesa_anyjev::client {

struct DaemonTarget {
  std::string target;          // what grpc::CreateCustomChannel takes
  bool several = false;        // a list or a resolver name: balance and health
  std::string service_config;  // JSON for ChannelArguments
};

// INVALID_ARGUMENT naming client.address and the bad element.
absl::StatusOr<DaemonTarget> ParseDaemonTarget(const std::string& address);

}  // namespace mesa_anyjev::client
