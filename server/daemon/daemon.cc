#include "server/daemon/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/auth/tenant_source.h"
#include "common/status/status_macros.h"
#include "common/util/build_info.h"
#include "common/util/files.h"
#include "common/util/host_port.h"
#include "common/util/state_dir.h"
#include "server/daemon/drain_watchdog.h"
#include "server/daemon/engine_events.h"
#include "server/daemon/model_factory.h"
#include "server/engine/engine.h"
#include "server/engine/observers.h"
#include "server/engine/queued_backend.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/model/device_fault.h"
#include "server/service/bundles_service.h"
#include "server/service/decisions_service.h"
#include "server/service/inference_service.h"
#include "server/service/reflection_v1.h"
#include "server/service/serving_state.h"
#include "server/service/tenant_auth.h"

namespace mesa_anyjev::daemon {
namespace {

// How long past server.drain_deadline_s work may hold the exit.
constexpr absl::Duration kDrainSlack = absl::Seconds(5);

constexpr char kInferenceService[] = "mesa.anyjev.v1.Inference";
constexpr char kDecisionsService[] = "mesa.anyjev.v1.Decisions";
constexpr char kBundlesService[] = "mesa.anyjev.v1.Bundles";

// A config problem found while starting: exit code 2, not 1.
bool IsConfigError(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsUnimplemented(status);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const config::ServerConfig& server) {
  if (server.tls_cert.empty()) return grpc::InsecureServerCredentials();
  auto cert = util::ReadFile(server.tls_cert);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server.tls_cert: ", cert.status().message()));
  }
  auto key = util::ReadFile(server.tls_key);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server.tls_key: ", key.status().message()));
  }
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

// gRPC's reflection library adds its v1alpha plugin to every server as it
// loads; with server.reflection: false this option takes it out again.
class WithoutReflectionPlugin final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    std::erase_if(*plugins, [](const auto& plugin) {
      return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(
                 plugin.get()) != nullptr;
    });
  }
};

absl::Status WritePortFile(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  return util::WriteFileAtomic(path, absl::StrCat(port, "\n"));
}

engine::EngineOptions EngineOptionsFrom(const config::Config& config) {
  engine::EngineOptions options;
  options.policy = config.engine.scheduler == "fifo"
                       ? engine::SchedulerPolicy::kFifo
                       : engine::SchedulerPolicy::kFair;
  options.limits.capacity = config.server.queue_capacity;
  options.limits.tenant_calls = config.engine.tenant_max_queued_calls;
  options.limits.tenant_tokens = config.engine.tenant_max_queued_tokens;
  return options;
}

service::InferenceOptions InferenceOptionsFrom(const config::Config& config) {
  service::InferenceOptions options;
  options.limits = config.limits;
  options.default_deadline = absl::Seconds(config.server.default_deadline_s);
  options.max_deadline = absl::Seconds(config.server.max_deadline_s);
  options.max_send_bytes = config.server.max_send_message_bytes;
  return options;
}

service::DecisionsOptions DecisionsOptionsFrom(const config::Config& config) {
  service::DecisionsOptions options;
  options.limits = config.limits;
  options.decisions = config.decisions;
  options.default_deadline = absl::Seconds(config.server.default_deadline_s);
  options.max_deadline = absl::Seconds(config.server.max_deadline_s);
  options.queue_capacity = config.server.queue_capacity;
  options.fair_workers = config.engine.scheduler != "fifo";
  return options;
}

service::BundlesOptions BundlesOptionsFrom(const config::Config& config) {
  service::BundlesOptions options;
  options.dir =
      util::ResolveBundlesDir(config.decisions.bundles_dir, std::getenv);
  if (options.dir.empty()) {
    spdlog::info("bundles: no store (decisions.bundles_dir={})",
                 config.decisions.bundles_dir);
  } else {
    spdlog::info("bundles: store under {} (decisions.bundles_dir={})",
                 options.dir, config.decisions.bundles_dir);
  }
  options.max_bundle_bytes = config.limits.max_bundle_bytes;
  return options;
}

// Message sizes, streams per connection and keepalive.
void SetTransportOptions(const config::ServerConfig& server,
                         grpc::ServerBuilder& builder) {
  // gRPC sets SO_REUSEPORT by default: a second daemon on a port in use
  // would bind it too and take a share of the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(server.max_receive_message_bytes));
  builder.SetMaxSendMessageSize(
      static_cast<int>(server.max_send_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             server.max_concurrent_streams);
  // Long-lived pipeline clients: probe dead peers every minute, and close
  // connections idle for five, so a vanished peer frees its slot.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 30'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 300'000);
}

}  // namespace

Daemon::Daemon(config::Config config, std::optional<engine::FaultPlan> faults)
    : config_(std::move(config)), faults_(std::move(faults)) {}

Daemon::~Daemon() = default;

int Daemon::Run() {
  const absl::Time start = absl::Now();
  if (absl::Status status = CheckModelPath(config_); !status.ok()) {
    spdlog::error("{}", std::string(status.message()));
    return 2;
  }
  if (absl::Status status = StartServing(); !status.ok()) {
    spdlog::error("{}", std::string(status.message()));
    return IsConfigError(status) ? 2 : 1;
  }
  absl::Status loaded = LoadAndWarmUp();
  if (loaded.ok()) {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    metrics_->SetModelLoaded(true);
    metrics_->SetModelLoadSeconds(seconds);
    if (auto device = backend_->device_info(); device.has_value()) {
      metrics_->SetDeviceInfo(*device);
    }
    loaded_backend_.store(backend_.get());
    state_->set(service::ServingState::kServing);
    server_->GetHealthCheckService()->SetServingStatus(true);
    spdlog::info("serving model '{}' (identity {}) after {:.2f} s",
                 backend_->identity().name,
                 backend_->identity().identity.substr(0, 12), seconds);
  } else if (!absl::IsCancelled(loaded)) {
    spdlog::error("{}", std::string(loaded.message()));
    RequestShutdown();
    Drain();
    if (exit_code_.load() != 0) return exit_code_.load();
    return IsConfigError(loaded) ? 2 : 1;
  }
  shutdown_.WaitForNotification();
  Drain();
  return exit_code_.load();
}

absl::Status Daemon::StartServing() {
  absl::MutexLock lock(&auth_mu_);
  // What the config can still refuse comes first, before a thread starts:
  // a tokens file that does not load stops the start with one line naming
  // the entry.
  ASSIGN_OR_RETURN(const auto tenants, auth::LoadTenants(config_.auth));
  auth_ = std::make_unique<service::TenantAuth>(tenants);
  ASSIGN_OR_RETURN(auto credentials, Credentials(config_.server));
  ASSIGN_OR_RETURN(auto listen, util::ParseHostPort(config_.server.listen));
  StartEngine();
  ApplyTenants(tenants, /*reloaded=*/false);
  MakeServices();
  ASSIGN_OR_RETURN(const int port, Listen(std::move(credentials)));
  RETURN_IF_ERROR(WritePortFile(config_.server.port_file, port));
  ASSIGN_OR_RETURN(const int metrics_port, StartMetricsEndpoint());
  spdlog::info(
      "mesa-anyjevd {} ({}) listening on {}:{}{}; metrics on {}; auth {}; "
      "loading model '{}'",
      util::kVersion, util::kCommit, listen.host, port,
      config_.server.tls_cert.empty() ? "" : " (TLS)",
      metrics_port == 0 ? std::string("off")
                        : absl::StrCat("port ", metrics_port),
      !auth_->enabled()                   ? "off"
      : !config_.auth.tokens_file.empty() ? "on (tokens file)"
                                          : "on (one token)",
      config_.model.path);
  return absl::OkStatus();
}

void Daemon::ApplyTenants(const std::shared_ptr<const auth::TenantSet>& tenants,
                          bool reloaded) {
  metrics_->SetTenantsLoaded(tenants ? tenants->tenants().size() : 0);
  // The engine's shares and limits; a call still held of a tenant the new
  // file dropped runs at weight 1 and the default limits.
  std::vector<engine::TenantShare> shares;
  if (tenants != nullptr) {
    for (const auth::Tenant& tenant : tenants->tenants()) {
      shares.push_back({tenant.name, tenant.weight,
                        static_cast<int32_t>(tenant.max_queued_calls),
                        tenant.max_queued_tokens});
    }
  }
  engine_->SetTenants(shares);
  if (tenants == nullptr) return;
  for (const auth::Tenant& tenant : tenants->tenants()) {
    metrics_->InitTenant(tenant.name);
  }
  // Names, roles and shares only: never a token or a digest.
  spdlog::info("auth: {} {}", reloaded ? "reloaded" : "loaded",
               auth::DescribeTenants(*tenants));
}

void Daemon::ReloadTenants() {
  absl::MutexLock lock(&auth_mu_);
  if (auth_ == nullptr) {
    spdlog::warn("SIGHUP before the daemon listens: nothing to reload yet");
    return;
  }
  if (!auth_->enabled()) {
    spdlog::info("SIGHUP: auth is off (auth.*); nothing to reload");
    return;
  }
  auto tenants = auth::LoadTenants(config_.auth);
  if (tenants.ok() && *tenants == nullptr) {
    tenants = absl::InvalidArgumentError("auth: no longer grants any token");
  }
  if (!tenants.ok()) {
    metrics_->RecordTokensReload(false);
    spdlog::error("SIGHUP: {}; the tenants loaded before stay",
                  std::string(tenants.status().message()));
    return;
  }
  auth_->Replace(*tenants);
  metrics_->RecordTokensReload(true);
  ApplyTenants(*tenants, /*reloaded=*/true);
}

void Daemon::StartEngine() {
  metrics_ =
      std::make_unique<metrics::ServerMetrics>(util::kVersion, util::kCommit);
  metrics_->SetModelLoaded(false);
  events_ = std::make_unique<EngineEvents>(
      [this](const absl::Status& status) { OnDeviceLost(status); },
      config_.engine.pass_records);
  observers_ = std::make_unique<engine::Observers>(
      std::vector<engine::EngineObserver*>{metrics_.get(), events_.get()});
  engine_ = std::make_unique<engine::Engine>(EngineOptionsFrom(config_),
                                             observers_.get());
  engine_->Start();
  state_ = std::make_unique<service::ServingStateFlag>();
}

void Daemon::MakeServices() {
  const service::CallGate gate{auth_.get(), state_.get()};
  inference_ = std::make_unique<service::InferenceService>(
      InferenceOptionsFrom(config_), engine_.get(), metrics_.get(), gate);
  bundles_ = std::make_unique<service::BundlesService>(
      BundlesOptionsFrom(config_), metrics_.get(), gate);
  decisions_ = std::make_unique<service::DecisionsService>(
      DecisionsOptionsFrom(config_), metrics_.get(), gate, bundles_.get());
}

absl::StatusOr<int> Daemon::Listen(
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  AddReflection(builder);
  int port = 0;
  builder.AddListeningPort(config_.server.listen, std::move(credentials),
                           &port);
  SetTransportOptions(config_.server, builder);
  builder.RegisterService(inference_.get());
  builder.RegisterService(decisions_.get());
  builder.RegisterService(bundles_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "server.listen: cannot listen on ", config_.server.listen,
        " (in use by another process, or not an address of this host)"));
  }
  auto* health = server_->GetHealthCheckService();
  health->SetServingStatus(false);
  for (const char* service :
       {kInferenceService, kDecisionsService, kBundlesService}) {
    health->SetServingStatus(service, false);
  }
  return port;
}

void Daemon::AddReflection(grpc::ServerBuilder& builder) {
  if (!config_.server.reflection) {
    builder.SetOption(std::make_unique<WithoutReflectionPlugin>());
    return;
  }
  // v1alpha from gRPC's plugin, v1 ours (gRPC 1.51 has none); both list the
  // same services.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  reflection_v1_ =
      std::make_unique<service::ReflectionV1Service>(std::vector<std::string>{
          kInferenceService, kDecisionsService, kBundlesService,
          "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
          "grpc.reflection.v1.ServerReflection"});
  builder.RegisterService(reflection_v1_.get());
}

absl::StatusOr<int> Daemon::StartMetricsEndpoint() {
  if (config_.server.metrics_listen.empty()) return 0;
  // Memory gauges are read when scraped; the model may not be loaded yet.
  metrics_endpoint_ = std::make_unique<metrics::MetricsEndpoint>(
      metrics_->registry(), [this] { RefreshMemoryGauges(); });
  ASSIGN_OR_RETURN(const int port,
                   metrics_endpoint_->Start(config_.server.metrics_listen));
  RETURN_IF_ERROR(WritePortFile(config_.server.metrics_port_file, port));
  return port;
}

void Daemon::RefreshMemoryGauges() {
  metrics_->RefreshProcessMemory();
  const Backend* backend = loaded_backend_.load();
  if (backend == nullptr) return;
  if (auto memory = backend->device_memory(); memory.has_value()) {
    metrics_->SetDeviceMemory(static_cast<double>(memory->allocated_bytes),
                              static_cast<double>(memory->reserved_bytes));
  }
}

absl::Status Daemon::LoadAndWarmUp() {
  ASSIGN_OR_RETURN(model_, LoadModel(config_, observers_.get(), metrics_.get(),
                                     shutdown_, faults_));
  engine_->SetLoop(std::move(model_.loop));
  backend_ =
      std::make_unique<engine::QueuedBackend>(model_.served, engine_.get());
  inference_->SetBackend(backend_.get());
  RETURN_IF_ERROR(decisions_->SetBackend(backend_.get()));
  // The promoted bundles are part of what SERVING promises.
  RETURN_IF_ERROR(bundles_->Start(backend_.get(), decisions_->decider()));
  // Readiness means the model answers: one real call through the engine,
  // for the top token only: no label, so none can count as missing (a
  // gateway's missing-label counter starts at 0).
  ASSIGN_OR_RETURN(auto ids, backend_->tokenizer().Encode("warm-up"));
  // The daemon's own work: no tenant, interactive.
  const Caller caller{absl::Now() +
                      absl::Seconds(config_.server.max_deadline_s)};
  const absl::Status result =
      engine_
          ->SubmitAndWait(engine::LogprobsTask{/*top_k=*/1},
                          {PromptGroup{ids, {{}}, {}}}, caller)
          .status();
  if (!result.ok()) {
    return absl::Status(
        result.code(), absl::StrCat("warm-up call failed: ", result.message()));
  }
  return absl::OkStatus();
}

void Daemon::OnDeviceLost(const absl::Status& status) {
  spdlog::error(
      "{}; health NOT_SERVING, the calls queued fail with UNAVAILABLE, exit "
      "code {} after the drain",
      std::string(status.message()), model::kDeviceLostExitCode);
  exit_code_.store(model::kDeviceLostExitCode);
  state_->set(service::ServingState::kDraining);
  metrics_->SetModelLoaded(false);
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
  }
  RequestShutdown();
}

void Daemon::Drain() {
  const absl::Time start = absl::Now();
  // The drain deadline is a hard bound: gRPC cancels the calls left at the
  // deadline and every worker polls its call's flag, but work that does not
  // poll (a long head fit) must not hold the exit. Past the deadline and a
  // few seconds of slack, the process ends here.
  const absl::Duration bound = absl::Seconds(config_.server.drain_grace_s +
                                             config_.server.drain_deadline_s) +
                               kDrainSlack;
  DrainWatchdog watchdog(bound, [bound] {
    spdlog::error(
        "drain: work still running {:.1f} s after the drain began (grace + "
        "deadline + slack); exiting without it",
        absl::ToDoubleSeconds(bound));
    spdlog::default_logger()->flush();
    std::_Exit(1);
  });
  // The state first: once the log line says so, no new call is served.
  if (state_) state_->set(service::ServingState::kDraining);
  spdlog::info(
      "draining: health NOT_SERVING, new calls UNAVAILABLE, {} calls held",
      engine_ ? engine_->depth() : 0);
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->Shutdown();
    if (config_.server.drain_grace_s > 0) {
      absl::SleepFor(absl::Seconds(config_.server.drain_grace_s));
    }
    // Accepted calls finish until the deadline; then gRPC cancels the rest
    // and the engine skips them.
    server_->Shutdown(absl::ToChronoTime(
        absl::Now() + absl::Seconds(config_.server.drain_deadline_s)));
  }
  // Decision workers wait on engine jobs: stop them while the engine runs.
  if (decisions_) decisions_->Stop();
  if (bundles_) bundles_->Stop();
  if (engine_) engine_->Stop();
  // After the engine: the replies it handed over are written first.
  if (inference_) inference_->Stop();
  if (metrics_endpoint_) metrics_endpoint_->Stop();
  spdlog::info("drained in {:.2f} s",
               absl::ToDoubleSeconds(absl::Now() - start));
  watchdog.Disarm();
}

}  // namespace mesa_anyjev::daemon
