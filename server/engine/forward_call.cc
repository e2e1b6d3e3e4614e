#include "server/engine/forward_call.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::engine {
namespace {

size_t PromptsOf(const std::vector<PromptGroup>& groups) {
  size_t n = 0;
  for (const PromptGroup& group : groups) n += group.suffixes.size();
  return n;
}

// A model whose output does not cover the call's groups: nothing to split.
absl::Status Uncovered(const char* what, size_t got, size_t want) {
  return absl::InternalError(absl::StrCat("the model returned ", what, " for ",
                                          got, " where the call has ", want));
}

absl::StatusOr<std::vector<ForwardOutput>> Split(const ForwardCall& call,
                                                 GroupLogprobs all) {
  size_t groups = 0;
  for (const ForwardMember& m : call.members) groups += m.groups->size();
  if (all.size() != groups)
    return Uncovered("logprobs (groups)", all.size(), groups);
  std::vector<ForwardOutput> out;
  auto next = all.begin();
  for (const ForwardMember& m : call.members) {
    const auto end = next + static_cast<std::ptrdiff_t>(m.groups->size());
    out.emplace_back(GroupLogprobs(std::make_move_iterator(next),
                                   std::make_move_iterator(end)));
    next = end;
  }
  return out;
}

absl::StatusOr<std::vector<ForwardOutput>> Split(const ForwardCall& call,
                                                 HiddenStatesResult all) {
  size_t prompts = 0;
  for (const ForwardMember& m : call.members) prompts += PromptsOf(*m.groups);
  const size_t row =
      all.layers.size() * static_cast<size_t>(std::max(all.hidden_size, 0));
  if (static_cast<size_t>(std::max(all.n_prompts, 0)) != prompts ||
      all.values.size() != prompts * row) {
    return Uncovered("hidden states (prompts)",
                     static_cast<size_t>(std::max(all.n_prompts, 0)), prompts);
  }
  std::vector<ForwardOutput> out;
  auto next = all.values.begin();
  for (const ForwardMember& m : call.members) {
    HiddenStatesResult part;
    part.layers = all.layers;
    part.hidden_size = all.hidden_size;
    const size_t n = PromptsOf(*m.groups);
    part.n_prompts = static_cast<int32_t>(n);
    const auto end = next + static_cast<std::ptrdiff_t>(n * row);
    part.values.assign(next, end);
    next = end;
    out.emplace_back(std::move(part));
  }
  return out;
}

}  // namespace

bool ForwardCall::ShouldStop(absl::Time now) const {
  return !members.empty() && std::all_of(members.begin(), members.end(),
                                         [now](const ForwardMember& m) {
                                           return m.caller.ShouldStop(now);
                                         });
}

absl::Status ForwardCall::StopStatus(absl::Time now, const char* where) const {
  if (members.size() == 1) return members.front().caller.StopStatus(now, where);
  if (!ShouldStop(now)) return absl::OkStatus();
  const bool all_late =
      std::none_of(members.begin(), members.end(),
                   [](const ForwardMember& m) { return m.caller.Cancelled(); });
  return all_late ? absl::DeadlineExceededError(
                        absl::StrCat(where, ": every caller's deadline passed"))
                  : absl::CancelledError(absl::StrCat(
                        where, ": every caller of the merged call stopped"));
}

std::vector<const PromptGroup*> ForwardCall::Groups() const {
  std::vector<const PromptGroup*> groups;
  for (const ForwardMember& m : members) {
    for (const PromptGroup& group : *m.groups) groups.push_back(&group);
  }
  return groups;
}

absl::StatusOr<std::vector<ForwardOutput>> SplitOutput(const ForwardCall& call,
                                                       ForwardOutput output) {
  if (std::holds_alternative<LogprobsTask>(call.task) !=
      std::holds_alternative<GroupLogprobs>(output)) {
    return absl::InternalError(
        "the model returned another kind of output than the call's task");
  }
  if (call.members.size() == 1) {
    std::vector<ForwardOutput> out;
    out.push_back(std::move(output));
    return out;
  }
  return std::visit([&call](auto& all) { return Split(call, std::move(all)); },
                    output);
}

}  // namespace mesa_anyjev::engine
