// Labels, prompts and the model's readings of them (see prompt_reader.h).
#include "common/decision/prompt_reader.h"

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/prompt_builder.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

std::vector<int> Identity(int k) {
  std::vector<int> out(k);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

absl::StatusOr<ResolvedLabels> PromptReader::Labels(const Question& question) {
  // Custom labels are part of the key.
  const std::string key =
      absl::StrCat(QuestionKindName(question.kind()), "/", question.k(), "/",
                   absl::StrJoin(question.custom_labels(), "\x1f"));
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = labels_.find(key); it != labels_.end()) {
      return it->second;
    }
  }
  auto resolved = ResolveLabels(backend_->tokenizer(), question);
  if (!resolved.ok()) {
    return absl::Status(
        resolved.status().code(),
        absl::StrCat(Describe(question), ": ", resolved.status().message()));
  }
  absl::MutexLock lock(&mu_);
  labels_.emplace(key, *resolved);
  return *resolved;
}

text::ChatParts PromptReader::Render(const std::string& state,
                                     const Question& question,
                                     const std::vector<int>& perm,
                                     const ResolvedLabels& labels) const {
  return RenderPromptParts(
      backend_->chat_template(),
      BuildPrompt(state, question, perm, system_, labels.labels));
}

std::string PromptReader::Text(const std::string& state,
                               const Question& question,
                               const std::vector<int>& perm,
                               const ResolvedLabels& labels) const {
  const text::ChatParts parts = Render(state, question, perm, labels);
  return absl::StrCat(parts.prefix, parts.suffix);
}

absl::StatusOr<std::vector<std::vector<double>>> PromptReader::Logprobs(
    const PromptRegistry& prompts, const CallControl& control) const {
  return scorer_.Logprobs(prompts.parts(), prompts.ids(), control,
                          prompts.owners());
}

absl::StatusOr<std::vector<Matrix>> PromptReader::HiddenStates(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int32_t>& layers,
    const std::vector<std::vector<int>>& perms, const CallControl& control) {
  ASSIGN_OR_RETURN(const ResolvedLabels labels, Labels(question));
  std::vector<text::ChatParts> prompts;
  std::vector<int> owners;
  for (size_t i = 0; i < states.size(); ++i) {
    const std::vector<int> perm =
        perms.empty() ? Identity(question.k()) : perms[i];
    prompts.push_back(Render(states[i], question, perm, labels));
    owners.push_back(static_cast<int>(i));
  }
  return scorer_.HiddenStates(prompts, layers, control, owners);
}

}  // namespace mesa_anyjev::decision
