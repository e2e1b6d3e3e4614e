// A failed daemon call in the user's terms. gRPC reports a daemon that is
// not running, a wrong port, a TLS mismatch or a missing token as transport
// text ("failed to connect to all addresses; ..."); the CLI says instead
// what happened and what to do about it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace mesa_anyjev::client {

struct DaemonEndpoint {
  std::string address;
  bool tls = false;       // client.tls_ca is set
  bool token = false;     // a bearer token is sent
  double timeout_s = 30;  // client.timeout_s
};

// `code` and `message` as the call failed; `what` names the call ("" for
// messages the CLI prints verbatim, such as a promote refusal). Transport,
// auth and lifecycle failures become one sentence with the remedy; the
// daemon's own refusals keep their message, prefixed by `what`.
absl::Status ExplainDaemonError(absl::StatusCode code, std::string_view message,
                                std::string_view what,
                                const DaemonEndpoint& endpoint);

}  // namespace mesa_anyjev::client
