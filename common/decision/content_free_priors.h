// Content-free priors (docs/decision.md, L0: shifts and priors): per
// listing, the probes ("N/A", "", "[MASK]" by default) read under each
// shift, their softmaxes averaged into a prior [P, K]. Cached per listing
// key: the probes of a listing are read once per decider. Safe under
// concurrent callers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"
#include "common/decision/listing.h"
#include "common/decision/numpy_ops.h"
#include "common/decision/prompt_reader.h"

namespace mesa_anyjev::decision {

class ContentFreePriors {
 public:
  explicit ContentFreePriors(std::vector<std::string> probes)
      : probes_(std::move(probes)) {}

  // The prior of each listing. The probes of those not cached are read
  // together in a call of their own, never beside real states, so a batch's
  // prompts do not depend on what was cached.
  absl::StatusOr<std::vector<std::optional<Matrix>>> For(
      const PromptReader& reader, const std::vector<Listing>& listings,
      const CallControl& control);

 private:
  const std::vector<std::string> probes_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Matrix> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
