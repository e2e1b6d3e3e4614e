// MakeProvider: the backend kinds of docs/cli.md.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/backends/composite_provider.h"
#include "client/backends/daemon_provider.h"
#include "client/backends/local_provider.h"
#include "client/backends/provider.h"
#include "common/fake_backend.h"
#include "common/gateway/gateway_backend.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {

using gateway::GatewayBackend;
using gateway::GatewayOptions;
using gateway::GatewayOptionsFromConfig;
namespace {

absl::StatusOr<std::unique_ptr<LocalProvider>> MakeGateway(
    const config::Config& config, const std::string& canonical_model) {
  GatewayOptions options = GatewayOptionsFromConfig(config.backend);
  options.canonical_model = canonical_model;
  // label_readout auto: one probe says whether labels can be read by id.
  CallControl control;
  control.deadline = absl::Now() + absl::Seconds(config.backend.timeout);
  ASSIGN_OR_RETURN(auto backend, GatewayBackend::Connect(options, control));
  GatewayBackend* gateway = backend.get();
  ProviderInfo info;
  info.kind = "gateway";
  info.model = canonical_model;
  info.served_model = config.backend.served_model;
  info.max_choice_k = gateway->capabilities().max_choice_k;
  info.hidden_states = false;
  info.logprob_top_k = config.backend.logprobs;
  return std::make_unique<LocalProvider>(
      std::move(backend), std::move(info),
      decision::DeciderOptionsFrom(config.decider),
      [gateway] { return gateway->missing_label_events(); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(
    const config::Config& config, const std::string& kind_in,
    std::shared_ptr<const RetryRule> retries) {
  const std::string kind = kind_in.empty() ? config.backend.kind : kind_in;
  if (kind == "fake") {
    const FakeBackendOptions fake{.delay_s = 0,
                                  .temperature = config.model.fake_temperature};
    ProviderInfo info;
    info.kind = "fake";
    info.model = FakeModelName(fake.temperature);
    info.identity = FakeBackend(fake).identity().identity;
    info.n_layers = FakeBackend::kNumLayers;
    info.hidden_size = FakeBackend::kHiddenSize;
    info.max_choice_k = FakeBackend::kMaxChoiceK;
    info.hidden_states = true;
    return std::make_unique<LocalProvider>(
        std::make_unique<FakeBackend>(fake), std::move(info),
        decision::DeciderOptionsFrom(config.decider));
  }
  if (kind == "gateway") {
    return MakeGateway(config, config.backend.canonical_model);
  }
  if (kind == "hf") return DaemonProvider::Create(config, std::move(retries));
  if (kind == "composite") {
    ASSIGN_OR_RETURN(auto daemon,
                     DaemonProvider::Create(config, std::move(retries)));
    // Named after the local model, so both halves key the same bundles.
    ASSIGN_OR_RETURN(auto gateway, MakeGateway(config, daemon->info().model));
    return CompositeProvider::Create(std::move(gateway), std::move(daemon));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend.kind: unknown backend kind '", kind,
                   "' (fake, gateway, hf or composite)"));
}

}  // namespace mesa_anyjev::client
