#include "server/metrics/metrics_endpoint.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/util/host_port.h"
#include "prometheus/text_serializer.h"

namespace mesa_anyjev::metrics {

MetricsEndpoint::MetricsEndpoint(std::shared_ptr<prometheus::Registry> registry,
                                 std::function<void()> before_collect)
    : registry_(std::move(registry)),
      before_collect_(std::move(before_collect)),
      server_(std::make_unique<httplib::Server>()) {}

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

absl::StatusOr<int> MetricsEndpoint::Start(const std::string& listen) {
  auto host_port = util::ParseHostPort(listen);
  if (!host_port.ok()) return host_port.status();
  server_->Get(
      "/metrics", [this](const httplib::Request&, httplib::Response& response) {
        if (before_collect_) before_collect_();
        response.set_content(
            prometheus::TextSerializer().Serialize(registry_->Collect()),
            "text/plain; version=0.0.4; charset=utf-8");
      });
  // httplib's default also sets SO_REUSEPORT, which lets a second daemon
  // bind the same port and share the scrapes; SO_REUSEADDR alone still
  // allows a quick restart past TIME_WAIT.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // A bare host for httplib: "[::1]" -> "::1".
  const std::string& host = host_port->host;
  int port = host_port->port;
  if (port == 0) {
    port = server_->bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!server_->bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    return absl::UnavailableError(
        absl::StrCat("server.metrics_listen: cannot bind ", listen,
                     " (in use by another process?)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return port;
}

void MetricsEndpoint::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace mesa_anyjev::metrics
