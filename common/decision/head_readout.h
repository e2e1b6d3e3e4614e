// L2 (docs/decision.md, L2: heads; Routing and adaptation): a routed head
// applied to the hidden state after its block, its standardiser
// re-estimated from the states its question was asked on (label-free
// adaptation) when the decider's adapt mode says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/decision/adaptation_store.h"
#include "common/decision/decider_options.h"
#include "common/decision/decision.h"
#include "common/decision/head_store.h"
#include "common/decision/prompt_reader.h"
#include "common/decision/question.h"

namespace mesa_anyjev::decision {

// One question's L2 decisions, and the hidden states [N, d] they read when
// adaptation applies: those join the key's statistics once the whole call
// has succeeded.
struct HeadReadout {
  std::vector<Decision> decisions;
  std::optional<Matrix> seen;
};

// `states` asked `question` through the head `routed` finds: one backend
// call for the hidden states at the head's block. A head adapts when the
// adapt mode applies to it (kRouted: one routed from another key) and the
// key's statistics, this batch included, count adapt_min_n states.
absl::StatusOr<HeadReadout> ReadHead(
    PromptReader& reader, const AdaptationStore& adaptation,
    const DeciderOptions& options, const Question& question,
    const RoutedHead& routed, const std::vector<std::string>& states,
    bool return_prompts, const CallControl& control);

}  // namespace mesa_anyjev::decision
