// The mesa-anyjev subcommands. Each returns the process exit code: 0 ok,
// 1 a check failed or the daemon answered an error, 2 usage or config error.
#pragma once

#include "common/config/config.h"

namespace mesa_anyjev::client {

struct OutputOptions {
  bool json = false;  // one JSON document on stdout instead of text
};

int RunHealth(const config::Config& config, const OutputOptions& output);
int RunInfo(const config::Config& config, const OutputOptions& output);

}  // namespace mesa_anyjev::client
