#include "client/commands/bundle_access.h"

#include "client/questions/question_lock.h"
#include "client/questions/question_set.h"
#include "common/fake_backend.h"

namespace mesa_anyjev::client {

std::string BundleLockSha() {
  return questions::LockSha(questions::QuestionSet::Reference());
}

bool BundlesInDaemon(const std::string& kind) {
  return kind == "hf" || kind == "composite";
}

absl::StatusOr<std::unique_ptr<bundles::BundleStore>> OpenLocalBundleStore(
    const config::Config& config, const std::string& kind) {
  bundles::ModelBinding model;
  if (kind == "fake") {
    model = {"fake", FakeBackend().identity().identity};
  } else {
    model = {config.backend.canonical_model, ""};
  }
  return bundles::BundleStore::Open(config.artifacts.dir, model,
                                    BundleLockSha());
}

}  // namespace mesa_anyjev::client
