// `mesa-anyjev config show`: the effective configuration (defaults < file <
// environment < flags) as YAML. Secrets never enter the configuration; the
// gateway key is reported only as set or unset, with where it comes from.
#include <iostream>

#include "client/commands/commands.h"
#include "common/config/config_loader.h"
#include "common/gateway/gateway_backend.h"

namespace mesa_anyjev::client {

using gateway::GatewayOptions;
using gateway::GatewayOptionsFromConfig;

int RunConfigShow(const config::Config& config) {
  std::cout << config::ToYaml(config);
  const GatewayOptions gateway = GatewayOptionsFromConfig(config.backend);
  std::cout << "# gateway API key: ";
  if (!gateway.api_key_file.empty()) {
    std::cout << "from the file " << gateway.api_key_file;
  } else if (!gateway.api_key_env.empty()) {
    std::cout << "from $" << gateway.api_key_env;
  } else {
    std::cout << "unset";
  }
  std::cout << " (the value is never printed)\n";
  return 0;
}

}  // namespace mesa_anyjev::client
