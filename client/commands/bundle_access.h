// Where a backend kind's bundles live (docs/bundles.md): the daemon's store
// for hf and composite (it serves them), the local store under
// artifacts.dir for fake and gateway, always under the question lock's sha.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/bundles/bundle_store.h"
#include "common/config/config.h"

namespace mesa_anyjev::client {

// The lock sha of the shipped question set.
std::string BundleLockSha();

// hf and composite keep their bundles in the daemon.
bool BundlesInDaemon(const std::string& kind);

// The local store for fake (bound to the fake model's fingerprint) or the
// gateway (bound by backend.canonical_model; it reports no fingerprint).
absl::StatusOr<std::unique_ptr<bundles::BundleStore>> OpenLocalBundleStore(
    const config::Config& config, const std::string& kind);

}  // namespace mesa_anyjev::client
