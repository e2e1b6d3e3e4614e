#include "client/commands/bundle_access.h"

#include <iostream>

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

absl::StatusOr<std::unique_ptr<bundles::BundleStore>> OpenLocalBundleStore(
    const config::Config& config, const std::string& kind) {
  // The fake binds by its fingerprint; the gateway reports none, so it
  // binds by name.
  const bundles::ModelBinding model{
      BundleModelFor(config, kind),
      kind == "fake" ? FakeBackend({.temperature =
                                        config.model.fake_temperature})
                           .identity()
                           .identity
                     : ""};
  return bundles::BundleStore::Open(config.artifacts.dir, model,
                                    BundleLockSha());
}

void LoadPromotedBundle(const config::Config& config, const std::string& kind,
                        Provider* provider) {
  if (BundlesInDaemon(kind)) return;
  auto store = OpenLocalBundleStore(config, kind);
  if (!store.ok()) {
    std::cerr << "artifact bundle refused: " << store.status().message()
              << "\n";
    return;
  }
  auto served = (*store)->Served();
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
