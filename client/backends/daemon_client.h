// The CLI's connection to mesa-anyjevd, in plain types: protobuf stays inside
// client/backends/. Every call carries the configured deadline and, when
// configured, the bearer token.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/config/config.h"

namespace grpc {
class Channel;
}

namespace mesa_anyjev::client {

struct DaemonInfo {
  ModelIdentity identity;
  Capabilities capabilities;
  config::LimitsConfig limits;
};

class DaemonClient {
 public:
  // Builds the channel (TLS when client.tls_ca is set) and reads the token;
  // does not connect yet.
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Create(
      const config::ClientConfig& config);

  // grpc.health.v1 Check of `service` ("" = the whole server): "SERVING",
  // "NOT_SERVING", ...; transport failures are errors.
  absl::StatusOr<std::string> Health(const std::string& service = "");
  absl::StatusOr<DaemonInfo> Info();

 private:
  DaemonClient(std::shared_ptr<grpc::Channel> channel,
               std::optional<std::string> token, absl::Duration timeout);

  std::shared_ptr<grpc::Channel> channel_;
  std::optional<std::string> token_;
  absl::Duration timeout_;
};

}  // namespace mesa_anyjev::client
