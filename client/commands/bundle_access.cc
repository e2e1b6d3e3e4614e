#include "client/commands/bundle_access.h"

#include <iostream>

#include "client/backends/daemon_client.h"
#include "client/commands/agreement_access.h"
#include "common/fake_backend.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"

namespace mesa_anyjev::client {

std::string BundleLockSha() {
  return questions::LockSha(questions::QuestionSet::Reference());
}

std::string BundleModelFor(const config::Config& config,
                           const std::string& kind) {
  return kind == "fake" ? FakeModelName(config.model.fake_temperature)
                        : config.backend.canonical_model;
}

bool BundlesInDaemon(const std::string& kind) {
  return kind == "hf" || kind == "composite";
}

absl::StatusOr<bundles::RecordedModel> BundleModelOf(
    const config::Config& config, const std::string& kind) {
  if (kind == "fake") {
    const FakeBackend fake(
        {.delay_s = 0, .temperature = config.model.fake_temperature});
    return bundles::RecordedModel{
        fake.identity().name, fake.identity().identity, kind,
        std::pair<int, int>{FakeBackend::kNumLayers, FakeBackend::kHiddenSize}};
  }
  if (!BundlesInDaemon(kind)) {
    return bundles::RecordedModel{config.backend.canonical_model, "", kind,
                                  std::nullopt};
  }
  auto client = DaemonClient::Create(config.client);
  if (!client.ok()) return client.status();
  auto info = (*client)->Info();
  if (!info.ok()) return info.status();
  bundles::RecordedModel model{info->identity.name, info->identity.identity,
                               kind, std::nullopt};
  if (info->capabilities.hidden_states) {
    model.hidden = std::pair<int, int>{info->capabilities.n_layers,
                                       info->capabilities.hidden_size};
  }
  return model;
}

absl::StatusOr<std::unique_ptr<bundles::BundleStore>> OpenLocalBundleStore(
    const config::Config& config, const std::string& kind) {
  // The fake binds by its fingerprint; the gateway reports none, so it
  // binds by name.
  const bundles::ModelBinding model{
      BundleModelFor(config, kind),
      kind == "fake"
          ? FakeBackend(
                {.delay_s = 0, .temperature = config.model.fake_temperature})
                .identity()
                .identity
          : ""};
  return bundles::BundleStore::Open(config.artifacts.dir, model,
                                    BundleLockSha());
}

void LoadPromotedBundle(const config::Config& config, const std::string& kind,
                        Provider* provider) {
  if (kind == "composite") EnableAgreedFailover(config, provider);
  if (BundlesInDaemon(kind)) return;
  auto store = OpenLocalBundleStore(config, kind);
  if (!store.ok()) {
    std::cerr << "artifact bundle refused: " << store.status().message()
              << "\n";
    return;
  }
  // The CLI's lock keys: a question with no CURRENT under it inherits an
  // earlier lock's of the same key (docs/bundles.md).
  const auto keys = questions::LockKeys(questions::QuestionSet::Reference());
  auto served = (*store)->Served(&keys);
  if (!served.ok()) {
    std::cerr << "artifact bundle refused: " << served.status().message()
              << "\n";
    return;
  }
  for (const std::string& why : served->refused) {
    std::cerr << "artifact bundle refused: " << why << "\n";
  }
  if (served->versions.empty()) return;
  auto loaded = provider->LoadArtifacts(served->file);
  if (!loaded.ok()) {
    std::cerr << "artifact bundle refused: " << loaded.status().message()
              << "\n";
  } else if (*loaded > 0) {
    std::cerr << "loaded " << *loaded
              << " artifact(s) from the promoted bundle\n";
  }
}

}  // namespace mesa_anyjev::client
