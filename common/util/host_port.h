// host:port parsing shared by the daemon's listeners and the CLI.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::util {

struct HostPort {
  std::string host;  // bare: "127.0.0.1", "::1", "localhost"
  int port = 0;      // 0..65535; 0 = any free port
};

// Accepts "host:port" and "[v6]:port"; anything else is INVALID_ARGUMENT.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

}  // namespace mesa_anyjev::util
