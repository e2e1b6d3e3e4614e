// Where the CLI (and a router) finds mesa-anyjevd: one host:port, a comma
// list of IP:port (several daemons), or a gRPC name such as
// dns:///gpu-hosts.internal:50151 that resolves to several. Several daemons
// are balanced by gRPC's own round_robin, which skips daemons whose health
// says NOT_SERVING (loading or draining) and retries UNAVAILABLE once on
// another daemon, so stopping one does not fail a run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::util {

struct DaemonTarget {
  std::string target;          // what grpc::CreateCustomChannel takes
  bool several = false;        // a list or a resolver name: balance and health
  std::string service_config;  // JSON for ChannelArguments
};

// INVALID_ARGUMENT naming client.address and the bad element.
absl::StatusOr<DaemonTarget> ParseDaemonTarget(const std::string& address);

// The request metadata a balancer in front of several daemons hashes on
// (deploy/nginx), so the calls about one state reach the daemon whose
// prefix cache holds it.
inline constexpr char kAffinityMetadata[] = "mesa-anyjev-affinity";

// 16 hex digits of FNV-1a over the first `bytes` bytes of `text` (the
// state's beginning: what its prompts share); "" (no key) when `bytes` is
// 0 or `text` is empty.
std::string AffinityKey(std::string_view text, int32_t bytes);

}  // namespace mesa_anyjev::util
