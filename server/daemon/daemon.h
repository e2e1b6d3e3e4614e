// mesa-anyjevd's lifecycle: listen (NOT_SERVING) -> load the model -> warm up
// -> SERVING -> on the first SIGTERM/SIGINT drain: NOT_SERVING, new calls
// UNAVAILABLE, accepted calls finish within server.drain_deadline_s -> exit 0.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "server/daemon/model_factory.h"
#include "server/engine/fault_plan.h"

namespace grpc {
class Server;
class ServerBuilder;
class ServerCredentials;
}  // namespace grpc

namespace mesa_anyjev {
namespace auth {
class TenantSet;
}  // namespace auth
namespace engine {
class Engine;
class Observers;
}  // namespace engine
namespace metrics {
class ServerMetrics;
class MetricsEndpoint;
}  // namespace metrics
namespace service {
class BundlesService;
class DecisionsService;
class InferenceService;
class ReflectionV1Service;
class ServingStateFlag;
class TenantAuth;
}  // namespace service
}  // namespace mesa_anyjev

namespace mesa_anyjev::daemon {

class EngineEvents;

class Daemon {
 public:
  // `faults`: tests only (--inject-faults), passes that fail as a device
  // would.
  explicit Daemon(config::Config config,
                  std::optional<engine::FaultPlan> faults = std::nullopt);
  ~Daemon();

  // Runs until drained; returns the process exit code (0 after a clean
  // drain, 1 on a runtime failure, 2 on a configuration error,
  // model::kDeviceLostExitCode once the device failed).
  int Run();

  // Starts the drain; safe from any thread, idempotent.
  void RequestShutdown() {
    if (!shutdown_.HasBeenNotified()) shutdown_.Notify();
  }

  // SIGHUP: reads auth.* again. A good file replaces the tenants for the
  // calls that arrive from then on (calls in flight keep theirs); a bad one
  // is logged in one line and counted, and the old tenants stay. Safe from
  // any thread.
  void ReloadTenants();

 private:
  // Listens with every service NOT_SERVING, then logs the start line; no
  // model yet.
  absl::Status StartServing();
  // The tenants in force, at start and after each reload: the start log,
  // the metrics, and the engine's per-tenant weights and limits.
  void ApplyTenants(const std::shared_ptr<const auth::TenantSet>& tenants,
                    bool reloaded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(auth_mu_);
  void StartEngine();  // metrics, the engine's thread, the state flag
  // inference, bundles, decisions (reads bundles)
  void MakeServices() ABSL_EXCLUSIVE_LOCKS_REQUIRED(auth_mu_);
  // The gRPC server on server.listen; the bound port.
  absl::StatusOr<int> Listen(
      std::shared_ptr<grpc::ServerCredentials> credentials);
  void AddReflection(grpc::ServerBuilder& builder);
  // /metrics when server.metrics_listen is set; its port, or 0 when off.
  absl::StatusOr<int> StartMetricsEndpoint();
  void RefreshMemoryGauges();  // on each scrape
  absl::Status LoadAndWarmUp();
  // A pass left the device unusable (the engine's event, on a thread of the
  // daemon's): health NOT_SERVING, new calls UNAVAILABLE, then the drain
  // (the engine refuses every call from then on) and the distinct exit
  // code.
  void OnDeviceLost(const absl::Status& status);
  void Drain();

  const config::Config config_;
  std::optional<engine::FaultPlan> faults_;
  absl::Notification shutdown_;
  std::atomic<int> exit_code_{0};  // set once the device is lost
  std::unique_ptr<metrics::ServerMetrics> metrics_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<EngineEvents> events_;
  std::unique_ptr<engine::Observers> observers_;  // the metrics and events_
  std::unique_ptr<engine::Engine> engine_;
  absl::Mutex auth_mu_;  // StartServing's auth_ against a SIGHUP
  std::unique_ptr<service::TenantAuth> auth_ ABSL_GUARDED_BY(auth_mu_);
  std::unique_ptr<service::ServingStateFlag> state_;
  std::unique_ptr<service::InferenceService> inference_;
  std::unique_ptr<service::BundlesService> bundles_;
  std::unique_ptr<service::DecisionsService> decisions_;  // reads bundles_
  std::unique_ptr<service::ReflectionV1Service> reflection_v1_;
  std::unique_ptr<grpc::Server> server_;
  LoadedModel model_;
  // The model as the services see it: its facts, its calls engine jobs.
  std::unique_ptr<Backend> backend_;
  // backend_ once loaded, for the metrics thread.
  std::atomic<const Backend*> loaded_backend_{nullptr};
};

}  // namespace mesa_anyjev::daemon
