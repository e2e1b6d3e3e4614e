#include "server/daemon/model_factory.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/composite_backend.h"
#include "common/fake_backend.h"
#include "common/status/status_macros.h"
#include "server/engine/backend_forward_model.h"
#include "server/model/checkpoint.h"
#include "server/service/remote_hidden_states.h"
#if MESA_ANYJEV_WITH_TORCH
#include "server/engine/qwen3_backend.h"
#endif

namespace mesa_anyjev::daemon {

namespace {

// Router mode: the gateway reads logprobs, the daemon at client.address
// serves hidden states; the bundle key is the daemon's model, as the
// reference's composite is named after hf_model.
absl::StatusOr<std::unique_ptr<Backend>> LoadComposite(
    const config::Config& config, gateway::GatewayObserver* observer) {
  gateway::GatewayOptions options =
      gateway::GatewayOptionsFromConfig(config.backend);
  options.observer = observer;
  CallControl control;
  control.deadline = absl::Now() + absl::Seconds(config.backend.timeout);
  std::string readout;
  ASSIGN_OR_RETURN(auto logprobs, gateway::GatewayBackend::Connect(
                                      options, control, &readout));
  if (!readout.empty()) spdlog::info("gateway label readout: {}", readout);
  ASSIGN_OR_RETURN(auto hidden, service::RemoteHiddenStates::Create(
                                    config.client, logprobs->tokenizer()));
  return std::unique_ptr<Backend>(std::make_unique<CompositeBackend>(
      std::move(logprobs), std::move(hidden)));
}

// A model with only the Backend seam, run by the job queue through the
// adapter.
LoadedModel Adapted(std::unique_ptr<Backend> backend) {
  LoadedModel loaded;
  loaded.adapter = std::make_unique<engine::BackendForwardModel>(backend.get());
  loaded.forward = loaded.adapter.get();
  loaded.backend = std::move(backend);
  return loaded;
}

}  // namespace

absl::Status CheckModelPath(const config::Config& config) {
  const std::string& path = config.model.path;
  if (config.model.backend == "composite" || path == "fake") {
    return absl::OkStatus();
  }
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.path: '", path,
                     "' is neither \"fake\" nor a checkpoint directory"));
  }
  const fs::path dir(path);
  const auto has = [&](std::string_view name) {
    return fs::exists(dir / name, error);
  };
  if (!has(model::Checkpoint::kConfigName) ||
      !(has(model::Checkpoint::kSingleName) ||
        has(model::Checkpoint::kIndexName))) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.path: '", path, "' is not a checkpoint: it needs ",
                     std::string(model::Checkpoint::kConfigName), " and ",
                     std::string(model::Checkpoint::kSingleName), " or ",
                     std::string(model::Checkpoint::kIndexName)));
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> LoadModel(
    const config::Config& config, engine::EngineObserver* observer,
    gateway::GatewayObserver* gateway, const absl::Notification& stop,
    const std::optional<engine::FaultPlan>& faults) {
  const config::ModelConfig& model = config.model;
  if (faults.has_value() &&
      (model.backend == "composite" || model.path == "fake")) {
    return absl::InvalidArgumentError(
        "--inject-faults: the fake and composite backends run no forward "
        "passes; give a checkpoint (model.path)");
  }
  if (model.backend == "composite") {
    ASSIGN_OR_RETURN(auto composite, LoadComposite(config, gateway));
    return Adapted(std::move(composite));
  }
  const config::EngineConfig& engine = config.engine;
  if (model.path == "fake") {
    // The fake "loads" for fake_load_s so tests can watch NOT_SERVING.
    if (stop.WaitForNotificationWithTimeout(absl::Seconds(model.fake_load_s))) {
      return absl::CancelledError("shutdown requested while loading");
    }
    FakeBackendOptions options;
    options.delay_s = model.fake_delay_s;
    options.temperature = model.fake_temperature;
    return Adapted(std::make_unique<FakeBackend>(options));
  }
  std::error_code error;
  if (!std::filesystem::is_directory(model.path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.path: '", model.path,
                     "' is neither \"fake\" nor a checkpoint directory"));
  }
#if MESA_ANYJEV_WITH_TORCH
  ASSIGN_OR_RETURN(auto backend,
                   engine::Qwen3Backend::Load(model, engine, observer));
  spdlog::info("{}", model::Describe(backend->device_facts()));
  spdlog::info("Qwen3 on {} in {}, {} attention, projections by {}",
               backend->identity().device, backend->identity().dtype,
               backend->identity().attention, backend->gemm());
  spdlog::info("forward: {}", backend->paths());
  if (!backend->cpu_paths().empty()) {
    spdlog::info("CPU paths: {}", backend->cpu_paths());
  }
  if (!backend->attention_note().empty()) {
    spdlog::info("attention: {}", backend->attention_note());
  }
  if (faults.has_value()) {
    spdlog::warn("fault injection armed (--inject-faults, tests only): {}",
                 faults->Describe());
    backend->InjectFaults(*faults);
  }
  LoadedModel loaded;
  loaded.forward = backend.get();
  loaded.backend = std::move(backend);
  return loaded;
#else
  (void)engine;
  (void)observer;
  (void)faults;
  return absl::FailedPreconditionError(absl::StrCat(
      "model.path: '", model.path,
      "' is a checkpoint, but this daemon was built without libtorch "
      "(MESA_ANYJEV_WITH_TORCH=OFF); only \"fake\" is served"));
#endif
}

}  // namespace mesa_anyjev::daemon
