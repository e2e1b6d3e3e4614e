#include "proto/daemon_channel.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/util/daemon_target.h"
#include "common/util/files.h"

namespace mesa_anyjev {
namespace {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsFor(
    const config::ClientConfig& client) {
  if (client.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  absl::StatusOr<std::string> ca = util::ReadFile(client.tls_ca);
  if (!ca.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("client.tls_ca: ", ca.status().message()));
  }
  if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "client.tls_ca: ", client.tls_ca,
        " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = *std::move(ca);
  return grpc::SslCredentials(options);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenDaemonChannel(
    const config::ClientConfig& client) {
  ASSIGN_OR_RETURN(auto credentials, CredentialsFor(client));
  ASSIGN_OR_RETURN(const util::DaemonTarget target,
                   util::ParseDaemonTarget(client.address));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  // A daemon that restarts (a rolling update, a crash) is reached again
  // within seconds of coming back: gRPC's reconnect backoff would otherwise
  // grow to two minutes while a run retries against the closed port.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  args.SetServiceConfigJSON(target.service_config);
  return grpc::CreateCustomChannel(target.target, credentials, args);
}

}  // namespace mesa_anyjev
