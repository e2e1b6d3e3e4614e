// Where a backend kind's bundles live (docs/bundles.md): the daemon's store
// for hf and composite (it serves them), the local store under
// artifacts.dir for fake and gateway, always under the question lock's sha.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "common/bundles/agreement_record.h"
#include "common/bundles/bundle_store.h"
#include "common/config/config.h"

namespace mesa_anyjev::client {

// The lock sha of the shipped question set.
std::string BundleLockSha();

// The model a local store's bundles are keyed by (docs/bundles.md): "fake" or
// backend.canonical_model (gateway). hf and composite keep theirs in the
// daemon, keyed by the model it serves.
std::string BundleModelFor(const config::Config& config,
                           const std::string& kind);

// hf and composite keep their bundles in the daemon.
bool BundlesInDaemon(const std::string& kind);

// The model whose bundles `kind` serves, as its manifests record it: the
// fake's name and fingerprint, the gateway's canonical_model (no
// identity), or the daemon's (asked over GetModelInfo for hf and
// composite), with its hidden states' shape where it serves L2.
absl::StatusOr<bundles::RecordedModel> BundleModelOf(
    const config::Config& config, const std::string& kind);

// The local store for fake (bound to the fake model's fingerprint) or the
// gateway (bound by backend.canonical_model; it reports no fingerprint).
absl::StatusOr<std::unique_ptr<bundles::BundleStore>> OpenLocalBundleStore(
    const config::Config& config, const std::string& kind);

// Before deciding, fake and gateway load the promoted bundle of their model
// from the local store, as the reference's non-fake backends do (the
// reference's fake loads nothing, which hid the learning loop on the
// README's path), printing `loaded <n> artifact(s) from the promoted
// bundle` or `artifact bundle refused: <why>` (the run goes on at L0) on
// stderr; hf and composite are served by the daemon, which keeps its
// CURRENT bundles loaded itself.
void LoadPromotedBundle(const config::Config& config, const std::string& kind,
                        Provider* provider);

}  // namespace mesa_anyjev::client
