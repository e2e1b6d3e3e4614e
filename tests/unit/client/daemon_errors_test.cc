#include "client/backends/daemon_errors.h"

#include <catch2/catch.hpp>
#include <string>

namespace mesa_anyjev::client {
namespace {

using absl::StatusCode;

std::string Say(StatusCode code, const std::string& message,
                DaemonEndpoint endpoint = {"127.0.0.1:50151"}) {
  return std::string(
      ExplainDaemonError(code, message, "Decide", endpoint).message());
}

TEST_CASE("Transport failures are said in the user's terms", "[client]") {
  CHECK(Say(StatusCode::kUnavailable,
            "failed to connect to all addresses; last error: UNKNOWN: "
            "ipv4:127.0.0.1:50151: Failed to connect to remote host: "
            "Connection refused")
            .find("no mesa-anyjevd answers at 127.0.0.1:50151") == 0);
  CHECK(Say(StatusCode::kUnavailable, "the model is still loading; retry later")
            .find("still loading its model") != std::string::npos);
  CHECK(Say(StatusCode::kUnavailable, "the daemon is draining; retry elsewhere")
            .find("shutting down") != std::string::npos);
  CHECK(Say(StatusCode::kUnavailable,
            "failed to connect to all addresses; last error: UNKNOWN: "
            "ipv4:127.0.0.1:50151: Ssl handshake failed: SSL_ERROR_SSL: "
            "error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER",
            {"127.0.0.1:50151", /*tls=*/true})
            .find("does not serve TLS") != std::string::npos);
  CHECK(Say(StatusCode::kUnavailable, "Trying to connect an http1.x server")
            .find("not mesa-anyjevd's gRPC port") != std::string::npos);
}

TEST_CASE("Auth failures say which flag fixes them", "[client]") {
  CHECK(Say(StatusCode::kUnauthenticated, "missing bearer token")
            .find("needs a bearer token: pass --token-file") !=
        std::string::npos);
  CHECK(Say(StatusCode::kUnauthenticated, "invalid bearer token",
            {"h:1", false, /*token=*/true})
            .find("refused the bearer token") != std::string::npos);
}

TEST_CASE("The daemon's own refusals keep their message", "[client]") {
  const absl::Status status = ExplainDaemonError(
      StatusCode::kInvalidArgument, "states[0].text: empty", "Decide", {"h:1"});
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(status.message() == "Decide: states[0].text: empty");
  CHECK(ExplainDaemonError(StatusCode::kFailedPrecondition,
                           "v2 regresses against v1", "", {"h:1"})
            .message() == "v2 regresses against v1");
}

}  // namespace
}  // namespace mesa_anyjev::client
