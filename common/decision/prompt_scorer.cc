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

absl::StatusOr<PromptScorer::Planned> PromptScorer::Plan(
    const std::vector<text::ChatParts>& prompts,
    const std::vector<std::vector<text::TokenId>>& label_ids,
    const CallControl& control) const {
  const text::Tokenizer& tokenizer = backend_->tokenizer();
  // Groups in order of first appearance, keyed by (prefix, label ids).
  struct Group {
    std::vector<text::TokenId> prefix;
    std::vector<text::TokenId> labels;
    std::vector<std::pair<size_t, std::vector<text::TokenId>>> members;
  };
  std::vector<Group> groups;
  std::map<std::pair<std::string, std::vector<text::TokenId>>, size_t> index;
  absl::flat_hash_map<std::string, std::vector<text::TokenId>> prefix_tokens;
  int64_t tokens = 0;  // what this round sends: each group's prefix once
  for (size_t i = 0; i < prompts.size(); ++i) {
    // Tokenising is the costly part of building prompts.
    RETURN_IF_ERROR(control.StopStatus(absl::Now(), "building prompts"));
    const text::ChatParts& prompt = prompts[i];
    auto it = prefix_tokens.find(prompt.prefix);
    if (it == prefix_tokens.end()) {
      ASSIGN_OR_RETURN(auto ids, tokenizer.Encode(prompt.prefix));
      it = prefix_tokens.emplace(prompt.prefix, std::move(ids)).first;
    }
    std::vector<text::TokenId> suffix;
    bool shared = false;
    if (!prompt.suffix.empty()) {
      ASSIGN_OR_RETURN(suffix, tokenizer.Encode(prompt.suffix));
      ASSIGN_OR_RETURN(const auto whole, tokenizer.Encode(absl::StrCat(
                                             prompt.prefix, prompt.suffix)));
      shared =
          whole.size() == it->second.size() + suffix.size() &&
          std::equal(it->second.begin(), it->second.end(), whole.begin()) &&
          std::equal(suffix.begin(), suffix.end(),
                     whole.begin() + it->second.size());
      if (!shared) suffix = whole;
    }
    const size_t length = shared || prompt.suffix.empty()
                              ? it->second.size() + suffix.size()
                              : suffix.size();
    if (control.max_prompt_tokens > 0 &&
        static_cast<int64_t>(length) > control.max_prompt_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("a decision prompt of ", length, " tokens exceeds ",
                       control.max_prompt_tokens_name, "=",
                       control.max_prompt_tokens, " (shorten the state)"));
    }
    if (shared) {
      const auto key = std::make_pair(prompt.prefix, label_ids[i]);
      auto g = index.find(key);
      if (g == index.end()) {
        g = index.emplace(key, groups.size()).first;
        groups.push_back(Group{it->second, label_ids[i], {}});
      }
      groups[g->second].members.emplace_back(i, std::move(suffix));
    } else {
      // Alone: the whole prompt as the prefix, one empty suffix.
      groups.push_back(Group{prompt.suffix.empty() ? it->second : suffix,
                             label_ids[i],
                             {{i, {}}}});
    }
  }
  // State-major: groups that share a beginning (one state's questions) go
  // to the backend together, so an engine finds the state still cached.
  std::stable_sort(
      groups.begin(), groups.end(), [](const Group& a, const Group& b) {
        return std::lexicographical_compare(a.prefix.begin(), a.prefix.end(),
                                            b.prefix.begin(), b.prefix.end());
      });
  for (const Group& group : groups) {
    tokens += static_cast<int64_t>(group.prefix.size());
    for (const auto& member : group.members) {
      tokens += static_cast<int64_t>(member.second.size());
    }
  }
  if (control.budget != nullptr) {
    RETURN_IF_ERROR(control.budget->Charge(tokens));
  }
  Planned plan;
  plan.where.resize(prompts.size());
  size_t in_call = 0;
  const size_t cap = static_cast<size_t>(std::max(1, max_prompts_per_call_));
  for (Group& group : groups) {
    size_t start = 0;
    while (start < group.members.size()) {
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

absl::StatusOr<std::vector<std::vector<double>>> PromptScorer::Logprobs(
    const std::vector<text::ChatParts>& prompts,
    const std::vector<std::vector<text::TokenId>>& label_ids,
    const CallControl& control) const {
  ASSIGN_OR_RETURN(const Planned plan, Plan(prompts, label_ids, control));
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
    const std::vector<int32_t>& layers, const CallControl& control) const {
  const std::vector<std::vector<text::TokenId>> no_labels(prompts.size());
  ASSIGN_OR_RETURN(const Planned plan, Plan(prompts, no_labels, control));
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
