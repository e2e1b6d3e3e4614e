// `mesa-anyjev health`: the daemon's grpc.health.v1 status; exit 0 only when
// it is SERVING.
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/backends/daemon_client.h"
#include "client/commands/commands.h"
#include "client/ui/terminal.h"

namespace mesa_anyjev::client {

int RunHealth(const config::Config& config, const OutputOptions& output) {
  auto client = DaemonClient::Create(config.client);
  if (!client.ok()) {
    std::cerr << "mesa-anyjev: " << client.status().message() << "\n";
    return 2;
  }
  auto status = (*client)->Health();
  if (output.json) {
    nlohmann::json doc = {{"address", config.client.address}};
    if (status.ok()) {
      doc["status"] = *status;
    } else {
      doc["status"] = "UNREACHABLE";
      doc["error"] = std::string(status.status().message());
    }
    ui::PrintJson(doc, std::cout);
  } else if (status.ok()) {
    std::cout << config.client.address << " " << *status << "\n";
  } else {
    std::cerr << "mesa-anyjev: " << status.status().message() << "\n";
  }
  return status.ok() && *status == "SERVING" ? 0 : 1;
}

}  // namespace mesa_anyjev::client
