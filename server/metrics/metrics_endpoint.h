// Serves the registry in Prometheus text format at GET /metrics on its own
// port. cpp-httplib, not prometheus-cpp's civetweb Exposer: civetweb's 100 KiB
// worker stacks fail in a libtorch process once static TLS grows.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace httplib {
class Server;
}

namespace mesa_anyjev::metrics {

class MetricsEndpoint {
 public:
  // `before_collect` (optional) refreshes gauges read at scrape time
  // (process and device memory).
  explicit MetricsEndpoint(std::shared_ptr<prometheus::Registry> registry,
                           std::function<void()> before_collect = nullptr);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Binds `listen` (host:port, port 0 = any free port) and serves in a
  // background thread. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::function<void()> before_collect_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace mesa_anyjev::metrics
