// One Decide's settings: the decider's options with the call's overrides
// applied, and what the call returns beside its decisions.
#pragma once

#include <optional>

#include "common/decision/decider_options.h"
#include "common/decision/permute.h"

namespace mesa_anyjev::decision {

struct CallSettings {
  PriorMode prior;
  Combine combine;
  bool canonical_order;
  std::optional<int> max_permutations;
  bool adaptive_shifts;
  std::optional<double> adaptive_margin;
  bool return_prompts;
  bool return_details;

  static CallSettings Of(const DeciderOptions& options,
                         const DecideOptions& call = {});
};

}  // namespace mesa_anyjev::decision
