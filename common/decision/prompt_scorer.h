// Sends rendered prompts to a Backend as prompt groups: prompts that share a
// prefix (the shifts of one question over one state) and the same label ids
// become one group, so the engine computes the prefix once. A prompt whose
// prefix and suffix do not tokenise to the tokens of the whole text (a merge
// across the cut) goes alone, as the reference's score_shared falls back to
// the flat path. Groups go in order of their prefix tokens (a state's
// questions together, so the engine's prefix cache still holds the state),
// cut into calls of at most max_prompts_per_call prompts. A round is refused
// when a prompt is over control.max_prompt_tokens (named by the state it
// renders, when the caller says which) or the round would take
// control.budget past its limit, and stops once the call should.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/decision/numpy_ops.h"
#include "common/text/chat_template.h"

namespace mesa_anyjev::decision {

class PromptScorer {
 public:
  PromptScorer(Backend* backend, int max_prompts_per_call)
      : backend_(backend), max_prompts_per_call_(max_prompts_per_call) {}

  // Label log-probabilities of each prompt at its ids, in prompt order.
  // `owners[i]` (when given) is the index of the state prompt i renders, or
  // -1 for none: a prompt over the length limit is refused as
  // "states[owner]: ...", so a client can tell which state to drop.
  absl::StatusOr<std::vector<std::vector<double>>> Logprobs(
      const std::vector<text::ChatParts>& prompts,
      const std::vector<std::vector<text::TokenId>>& label_ids,
      const CallControl& control, const std::vector<int>& owners = {}) const;

  // Last-position hidden states of each prompt at each layer: result[l] is
  // [N, hidden] for layers[l]. `owners` as for Logprobs.
  absl::StatusOr<std::vector<Matrix>> HiddenStates(
      const std::vector<text::ChatParts>& prompts,
      const std::vector<int32_t>& layers, const CallControl& control,
      const std::vector<int>& owners = {}) const;

 private:
  Backend* const backend_;
  const int max_prompts_per_call_;
};

}  // namespace mesa_anyjev::decision
