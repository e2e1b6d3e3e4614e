// `mesa-anyjev config show`: the effective configuration (defaults < file <
// environment < flags) as YAML. Secrets never enter the configuration; the
// gateway key is reported only as set or unset, with where it comes from.
#include <iostream>

#include "client/commands/commands.h"
#include "client/ui/terminal.h"
#include "common/config/config_loader.h"
#include "common/gateway/gateway_backend.h"

namespace mesa_anyjev::client {

using gateway::GatewayOptions;
using gateway::GatewayOptionsFromConfig;

int RunConfigShow(const config::Config& config, const OutputOptions& output) {
  const GatewayOptions gateway = GatewayOptionsFromConfig(config.backend);
  if (output.json) {
    nlohmann::ordered_json doc = config::ToJson(config);
    doc["gateway_api_key"] = !gateway.api_key_file.empty()  ? "file"
                             : !gateway.api_key_env.empty() ? "env"
                                                            : "unset";
    ui::PrintJson(doc, std::cout);
    return 0;
  }
  std::cout << config::ToYaml(config);
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
