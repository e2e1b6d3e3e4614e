// `mesa-anyjev health`: the daemon's grpc.health.v1 status; exit 0 only when
// it is SERVING. --wait N polls until it is, for scripts that start a daemon.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/backends/daemon_client.h"
#include "client/commands/commands.h"
#include "client/ui/terminal.h"

namespace mesa_anyjev::client {

int RunHealth(const config::Config& config, const OutputOptions& output,
              double wait_s) {
  auto client = DaemonClient::Create(config.client);
  if (!client.ok()) {
    std::cerr << "mesa-anyjev: " << client.status().message() << "\n";
    return 2;
  }
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  auto status = (*client)->Health();
  // A daemon still starting refuses connections or says NOT_SERVING; both
  // are worth another look until the wait is over.
  while ((!status.ok() || *status != "SERVING") &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = (*client)->Health();
  }
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
