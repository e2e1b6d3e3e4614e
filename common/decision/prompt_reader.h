// The model as the decision readouts see it: a question's answer labels as
// token ids (resolved once per kind, K and custom labels, as the package
// caches them), prompts rendered through the model's chat template, and
// rendered prompts read for label log-probs or hidden states through a
// PromptScorer (prompt groups, calls of at most max_prompts_per_call
// prompts). Safe under concurrent callers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"
#include "common/decision/label_resolver.h"
#include "common/decision/numpy_ops.h"
#include "common/decision/prompt_registry.h"
#include "common/decision/prompt_scorer.h"
#include "common/decision/question.h"
#include "common/text/chat_template.h"

namespace mesa_anyjev::decision {

class PromptReader {
 public:
  // `backend` outlives the reader; `system` is the prompts' system line.
  PromptReader(Backend* backend, std::string system, int max_prompts_per_call)
      : backend_(backend),
        system_(std::move(system)),
        scorer_(backend, max_prompts_per_call) {}

  const Capabilities& capabilities() const { return backend_->capabilities(); }
  // The question's labels and their ids; an error names the question.
  absl::StatusOr<ResolvedLabels> Labels(const Question& question);
  // `state` asked `question` with the options shown in `perm` order.
  text::ChatParts Render(const std::string& state, const Question& question,
                         const std::vector<int>& perm,
                         const ResolvedLabels& labels) const;
  // The same, as one text.
  std::string Text(const std::string& state, const Question& question,
                   const std::vector<int>& perm,
                   const ResolvedLabels& labels) const;

  // Label log-probs of every prompt in `prompts`, by row, in one backend call
  // (split only by max_prompts_per_call).
  absl::StatusOr<std::vector<std::vector<double>>> Logprobs(
      const PromptRegistry& prompts, const CallControl& control) const;
  // Hidden states [N, d] per layer of `states` asked `question`, state i
  // under perms[i] (all unpermuted when `perms` is empty).
  absl::StatusOr<std::vector<Matrix>> HiddenStates(
      const Question& question, const std::vector<std::string>& states,
      const std::vector<int32_t>& layers,
      const std::vector<std::vector<int>>& perms, const CallControl& control);

 private:
  Backend* const backend_;
  const std::string system_;
  const PromptScorer scorer_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ResolvedLabels> labels_ ABSL_GUARDED_BY(mu_);
};

// The options in the question's own order: [0, 1, ..., k - 1].
std::vector<int> Identity(int k);

}  // namespace mesa_anyjev::decision
