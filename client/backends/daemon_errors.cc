#include "client/backends/daemon_errors.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::client {
namespace {

bool Has(std::string_view message, std::string_view needle) {
  const auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  return std::search(message.begin(), message.end(), needle.begin(),
                     needle.end(), [&](char a, char b) {
                       return lower(a) == lower(b);
                     }) != message.end();
}

}  // namespace

absl::Status ExplainDaemonError(absl::StatusCode code, std::string_view message,
                                std::string_view what,
                                const DaemonEndpoint& endpoint) {
  const std::string& at = endpoint.address;
  auto said = [&](std::string text) { return absl::Status(code, text); };
  if (code == absl::StatusCode::kUnavailable) {
    if (Has(message, "still loading")) {
      return said(absl::StrCat(
          "mesa-anyjevd at ", at,
          " is still loading its model; wait until `mesa-anyjev health "
          "--address ",
          at, "` says SERVING"));
    }
    if (Has(message, "draining")) {
      return said(absl::StrCat("mesa-anyjevd at ", at,
                               " is shutting down (draining); use another "
                               "daemon or restart it"));
    }
    if (Has(message, "ssl") || Has(message, "handshake") ||
        Has(message, "certificate")) {
      if (Has(message, "certificate verify failed") ||
          Has(message, "CERTIFICATE_VERIFY_FAILED")) {
        return said(absl::StrCat(
            "TLS with ", at,
            " failed: its certificate is not signed by the CA in --tls-ca "
            "(client.tls_ca), or names another host"));
      }
      return said(absl::StrCat(
          "TLS with ", at,
          " failed: the daemon there does not serve TLS; drop --tls-ca "
          "(client.tls_ca), or give it server.tls_cert and server.tls_key"));
    }
    if (Has(message, "http1") || Has(message, "http/1")) {
      return said(absl::StrCat(
          at,
          " answers HTTP/1, not gRPC: that is not mesa-anyjevd's gRPC port "
          "(the metrics port?); check --address (client.address)"));
    }
    if (Has(message, "connection refused") ||
        Has(message, "failed to connect") || Has(message, "no address") ||
        Has(message, "DNS resolution failed")) {
      return said(absl::StrCat(
          "no mesa-anyjevd answers at ", at,
          " (connection refused): start it (`mesa-anyjevd --model fake`) or "
          "give its address with --address host:port"));
    }
    if (Has(message, "socket closed") || Has(message, "connection reset") ||
        Has(message, "end of stream") || Has(message, "goaway")) {
      return said(absl::StrCat(
          at, " closed the connection before answering: ",
          endpoint.tls ? "is this mesa-anyjevd's gRPC port?"
                       : "if the daemon serves TLS, pass --tls-ca CA.pem "
                         "(client.tls_ca); else is this its gRPC port?"));
    }
  }
  if (code == absl::StatusCode::kUnauthenticated) {
    return said(
        endpoint.token
            ? absl::StrCat("mesa-anyjevd at ", at,
                           " refused the bearer token: check the file in "
                           "--token-file (client.token_file) or the variable "
                           "in client.token_env")
            : absl::StrCat("mesa-anyjevd at ", at,
                           " needs a bearer token: pass --token-file FILE "
                           "(mode 0600) or set client.token_env"));
  }
  if (code == absl::StatusCode::kPermissionDenied) {
    // The daemon's message names the method, the tenant and the role needed.
    return said(absl::StrCat(
        "mesa-anyjevd at ", at, " refused: ", std::string(message),
        "; a token of that role comes from the daemon's admin (mesa-anyjev "
        "tokens add)"));
  }
  if (code == absl::StatusCode::kDeadlineExceeded &&
      (message.empty() || Has(message, "deadline exceeded"))) {
    return said(absl::StrCat("no answer from mesa-anyjevd at ", at, " within ",
                             endpoint.timeout_s,
                             " s (client.timeout_s); is it overloaded?"));
  }
  if (code == absl::StatusCode::kUnimplemented && !Has(message, "mesa")) {
    return said(absl::StrCat(at,
                             " does not serve this call: is it an older "
                             "mesa-anyjevd, or another gRPC server?"));
  }
  return said(what.empty() ? std::string(message)
                           : absl::StrCat(std::string(what), ": ",
                                          std::string(message)));
}

}  // namespace mesa_anyjev::client
