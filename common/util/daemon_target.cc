#include "common/util/daemon_target.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/util/host_port.h"

namespace mesa_anyjev::util {
namespace {

// Retries stay on UNAVAILABLE only (a daemon that went away or is draining);
// round_robin sends the retry to the next daemon.
std::string ServiceConfig(bool health_check) {
  const std::string retry =
      R"({"name": [{"service": "mesa.anyjev.v1.Decisions"},
      {"service": "mesa.anyjev.v1.Inference"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s",
      "maxBackoff": "1s", "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]}})";
  // Client-side health checking only with several daemons: with one, the
  // CLI's `health` must still see NOT_SERVING rather than "no backend".
  return absl::StrCat(
      R"({"loadBalancingConfig": [{"round_robin": {}}],)",
      health_check ? R"("healthCheckConfig": {"serviceName": ""},)" : "",
      R"("methodConfig": [)", retry, "]}");
}

}  // namespace

absl::StatusOr<DaemonTarget> ParseDaemonTarget(const std::string& address) {
  DaemonTarget out;
  if (absl::StartsWith(address, "dns:") || absl::StartsWith(address, "ipv4:") ||
      absl::StartsWith(address, "ipv6:")) {
    out.target = address;
    out.several = true;
  } else if (absl::StrContains(address, ',')) {
    std::vector<std::string> parts = absl::StrSplit(address, ',');
    bool v6 = false;
    for (size_t i = 0; i < parts.size(); ++i) {
      auto host_port = util::ParseHostPort(parts[i]);
      if (!host_port.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("client.address: element ", i + 1, " ('", parts[i],
                         "'): ", host_port.status().message()));
      }
      // gRPC's list schemes take literal addresses; names go through dns:///.
      const bool is_v6 = absl::StrContains(host_port->host, ':');
      const bool is_v4 =
          host_port->host.find_first_not_of("0123456789.") == std::string::npos;
      if (!is_v4 && !is_v6) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client.address: element ", i + 1, " ('", parts[i],
            "') is a name; a list takes IP:port only (use dns:///name:port for "
            "a name that resolves to several daemons)"));
      }
      if (i > 0 && is_v6 != v6) {
        return absl::InvalidArgumentError(
            "client.address: a list mixes IPv4 and IPv6 addresses");
      }
      v6 = is_v6;
    }
    out.target =
        absl::StrCat(v6 ? "ipv6:" : "ipv4:", absl::StrJoin(parts, ","));
    out.several = true;
  } else {
    out.target = address;
  }
  out.service_config = ServiceConfig(out.several);
  return out;
}

std::string AffinityKey(std::string_view text, int32_t bytes) {
  if (bytes <= 0 || text.empty()) return "";
  text = text.substr(0, static_cast<size_t>(bytes));
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;  // FNV prime
  }
  return absl::StrCat(absl::Hex(hash, absl::kZeroPad16));
}

}  // namespace mesa_anyjev::util
