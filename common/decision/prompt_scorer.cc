// Prompt groups to the backend (see prompt_scorer.h).
#include "common/decision/prompt_scorer.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {
namespace {

using Tokens = std::vector<text::TokenId>;

// Prompts that share a prefix and label ids, or one prompt alone.
struct Group {
  Tokens prefix;
  Tokens labels;
  std::vector<std::pair<size_t, Tokens>> members;  // (prompt, suffix)
};

// Where a round's prompts go: the backend calls, and for each prompt its
// (call, group, suffix) position.
struct Plan {
  struct Where {
    size_t call = 0;
    size_t group = 0;
    size_t suffix = 0;
  };
  std::vector<std::vector<PromptGroup>> calls;
  std::vector<Where> where;
};

// A prompt's tokens as sent. Shared: its suffix's tokens after its prefix's,
// when the two together tokenise as the whole text does. Alone: the whole
// text's tokens (no suffix, or a merge across the cut).
struct Split {
  bool shared = false;
  Tokens tokens;
  size_t length = 0;  // the prompt's tokens in all
};

absl::StatusOr<Split> SplitPrompt(const text::Tokenizer& tokenizer,
                                  const text::ChatParts& prompt,
                                  const Tokens& prefix) {
  if (prompt.suffix.empty()) return Split{false, prefix, prefix.size()};
  ASSIGN_OR_RETURN(Tokens suffix, tokenizer.Encode(prompt.suffix));
  ASSIGN_OR_RETURN(Tokens whole, tokenizer.Encode(absl::StrCat(prompt.prefix,
                                                               prompt.suffix)));
  const bool shared =
      whole.size() == prefix.size() + suffix.size() &&
      std::equal(prefix.begin(), prefix.end(), whole.begin()) &&
      std::equal(suffix.begin(), suffix.end(), whole.begin() + prefix.size());
  if (!shared) {
    const size_t length = whole.size();
    return Split{false, std::move(whole), length};
  }
  const size_t length = prefix.size() + suffix.size();
  return Split{true, std::move(suffix), length};
}

// `owner`: the state the prompt renders (-1: none, a content-free probe).
absl::Status CheckLength(size_t length, int owner, const CallControl& control) {
  if (control.max_prompt_tokens > 0 &&
      static_cast<int64_t>(length) > control.max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(owner >= 0 ? absl::StrCat("states[", owner, "]: ") : "",
                     "a decision prompt of ", length, " tokens exceeds ",
                     control.max_prompt_tokens_name, "=",
                     control.max_prompt_tokens, " (shorten the state)"));
  }
  return absl::OkStatus();
}

// Groups in order of first appearance, keyed by (prefix, label ids).
absl::StatusOr<std::vector<Group>> GroupPrompts(
    const text::Tokenizer& tokenizer,
    const std::vector<text::ChatParts>& prompts,
    const std::vector<Tokens>& label_ids, const std::vector<int>& owners,
    const CallControl& control) {
  std::vector<Group> groups;
  std::map<std::pair<std::string, Tokens>, size_t> index;
  absl::flat_hash_map<std::string, Tokens> prefix_tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    // Tokenising is the costly part of building prompts.
    RETURN_IF_ERROR(control.StopStatus(absl::Now(), "building prompts"));
    const text::ChatParts& prompt = prompts[i];
    auto prefix = prefix_tokens.find(prompt.prefix);
    if (prefix == prefix_tokens.end()) {
      ASSIGN_OR_RETURN(Tokens ids, tokenizer.Encode(prompt.prefix));
      prefix = prefix_tokens.emplace(prompt.prefix, std::move(ids)).first;
    }
    ASSIGN_OR_RETURN(Split split,
                     SplitPrompt(tokenizer, prompt, prefix->second));
    RETURN_IF_ERROR(
        CheckLength(split.length, i < owners.size() ? owners[i] : -1, control));
    if (!split.shared) {
      // Alone: the whole prompt as the prefix, one empty suffix.
      groups.push_back(Group{std::move(split.tokens), label_ids[i], {{i, {}}}});
      continue;
    }
    const auto [g, added] = index.try_emplace(
        std::make_pair(prompt.prefix, label_ids[i]), groups.size());
    if (added) groups.push_back(Group{prefix->second, label_ids[i], {}});
    groups[g->second].members.emplace_back(i, std::move(split.tokens));
  }
  return groups;
}

// State-major: groups that share a beginning (one state's questions) go to
// the backend together, so an engine finds the state still cached.
void SortStateMajor(std::vector<Group>& groups) {
  std::stable_sort(
      groups.begin(), groups.end(), [](const Group& a, const Group& b) {
        return std::lexicographical_compare(a.prefix.begin(), a.prefix.end(),
                                            b.prefix.begin(), b.prefix.end());
      });
}

// What a round sends: each group's prefix once, and every suffix.
int64_t TokensSent(const std::vector<Group>& groups) {
  int64_t tokens = 0;
  for (const Group& group : groups) {
    tokens += static_cast<int64_t>(group.prefix.size());
    for (const auto& member : group.members) {
      tokens += static_cast<int64_t>(member.second.size());
    }
  }
  return tokens;
}

// Calls of at most `cap` prompts, the groups in order; a group the cap cuts
// goes on in the next call under the same prefix.
Plan CutIntoCalls(std::vector<Group> groups, size_t n_prompts, size_t cap) {
  Plan plan;
  plan.where.resize(n_prompts);
  size_t in_call = 0;
  for (Group& group : groups) {
    for (size_t start = 0; start < group.members.size();) {
      if (plan.calls.empty() || in_call >= cap) {
        plan.calls.emplace_back();
        in_call = 0;
      }
      const size_t take = std::min(group.members.size() - start, cap - in_call);
      PromptGroup out;
      out.prefix = group.prefix;
      out.label_ids = group.labels;
      for (size_t m = start; m < start + take; ++m) {
        plan.where[group.members[m].first] = {plan.calls.size() - 1,
                                              plan.calls.back().size(),
                                              out.suffixes.size()};
        out.suffixes.push_back(std::move(group.members[m].second));
      }
      plan.calls.back().push_back(std::move(out));
      in_call += take;
      start += take;
    }
  }
  return plan;
}

// Refuses a prompt over control.max_prompt_tokens and a round that takes
// control.budget past its limit, and stops once the call should.
absl::StatusOr<Plan> PlanRound(const text::Tokenizer& tokenizer,
                               const std::vector<text::ChatParts>& prompts,
                               const std::vector<Tokens>& label_ids,
                               const std::vector<int>& owners,
                               const CallControl& control,
                               int max_prompts_per_call) {
  ASSIGN_OR_RETURN(
      std::vector<Group> groups,
      GroupPrompts(tokenizer, prompts, label_ids, owners, control));
  SortStateMajor(groups);
  if (control.budget != nullptr) {
    RETURN_IF_ERROR(control.budget->Charge(TokensSent(groups)));
  }
  const size_t cap = static_cast<size_t>(std::max(1, max_prompts_per_call));
  return CutIntoCalls(std::move(groups), prompts.size(), cap);
}

}  // namespace

absl::StatusOr<std::vector<std::vector<double>>> PromptScorer::Logprobs(
    const std::vector<text::ChatParts>& prompts,
    const std::vector<std::vector<text::TokenId>>& label_ids,
    const CallControl& control, const std::vector<int>& owners) const {
  ASSIGN_OR_RETURN(const Plan plan,
                   PlanRound(backend_->tokenizer(), prompts, label_ids, owners,
                             control, max_prompts_per_call_));
  std::vector<std::vector<std::vector<PromptLogprobs>>> results;
  for (const auto& call : plan.calls) {
    ASSIGN_OR_RETURN(auto result,
                     backend_->Logprobs(call, /*top_k=*/0, control));
    if (result.size() != call.size()) {
      return absl::InternalError("backend returned the wrong number of groups");
    }
    results.push_back(std::move(result));
  }
  std::vector<std::vector<double>> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& w = plan.where[i];
    const auto& group = results[w.call][w.group];
    if (w.suffix >= group.size() ||
        group[w.suffix].label_logprobs.size() != label_ids[i].size()) {
      return absl::InternalError("backend returned a malformed group");
    }
    out[i] = group[w.suffix].label_logprobs;
  }
  return out;
}

absl::StatusOr<std::vector<Matrix>> PromptScorer::HiddenStates(
    const std::vector<text::ChatParts>& prompts,
    const std::vector<int32_t>& layers, const CallControl& control,
    const std::vector<int>& owners) const {
  const std::vector<std::vector<text::TokenId>> no_labels(prompts.size());
  ASSIGN_OR_RETURN(const Plan plan,
                   PlanRound(backend_->tokenizer(), prompts, no_labels, owners,
                             control, max_prompts_per_call_));
  const Eigen::Index n = static_cast<Eigen::Index>(prompts.size());
  std::vector<Matrix> out;
  for (size_t c = 0; c < plan.calls.size(); ++c) {
    const auto& call = plan.calls[c];
    ASSIGN_OR_RETURN(const HiddenStatesResult result,
                     backend_->HiddenStates(call, layers, control));
    const int32_t hidden = result.hidden_size;
    const size_t n_layers = result.layers.size();
    if (n_layers != layers.size() ||
        result.values.size() !=
            static_cast<size_t>(result.n_prompts) * n_layers * hidden) {
      return absl::InternalError("backend returned malformed hidden states");
    }
    if (out.empty()) {
      out.assign(layers.size(), Matrix::Zero(n, hidden));
    }
    // Row of each (group, suffix) in this call's result: groups in order,
    // suffixes in order.
    std::vector<size_t> first_row(call.size(), 0);
    for (size_t g = 1; g < call.size(); ++g) {
      first_row[g] = first_row[g - 1] + call[g - 1].suffixes.size();
    }
    for (Eigen::Index i = 0; i < n; ++i) {
      const auto& w = plan.where[i];
      if (w.call != c) continue;
      const size_t row = first_row[w.group] + w.suffix;
      for (size_t l = 0; l < n_layers; ++l) {
        const float* src = result.values.data() + (row * n_layers + l) * hidden;
        for (int32_t h = 0; h < hidden; ++h) out[l](i, h) = src[h];
      }
    }
  }
  return out;
}

}  // namespace mesa_anyjev::decision
