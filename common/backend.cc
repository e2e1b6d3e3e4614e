#include "common/backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev {
namespace {

constexpr util::EnumName<Priority> kPriorityNames[] = {
    {Priority::kInteractive, "interactive"}, {Priority::kBatch, "batch"}};
static_assert(util::NamesEvery(kPriorityNames, Priority::kBatch));

}  // namespace

const char* PriorityName(Priority priority) {
  return util::NameIn(kPriorityNames, priority);
}

std::optional<Priority> PriorityNamed(std::string_view name) {
  return util::ValueIn(kPriorityNames, name);
}

std::string PriorityNames() { return util::NamesIn(kPriorityNames); }

absl::Status TokenBudget::Charge(int64_t tokens) {
  const int64_t total = used.fetch_add(tokens) + tokens;
  if (limit > 0 && total > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("the call's prompts come to more than ", limit_name, "=",
                     limit, " tokens (", total, " so far)"));
  }
  return absl::OkStatus();
}

absl::Status Caller::StopStatus(absl::Time now, const char* where) const {
  if (Cancelled()) {
    return absl::CancelledError(absl::StrCat(where, ": the caller cancelled"));
  }
  if (now >= deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, ": the call's deadline passed"));
  }
  return absl::OkStatus();
}

namespace {

absl::Status CheckId(TokenId id, int32_t vocab_size, const std::string& where) {
  if (id < 0 || id >= vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": token id ", id, " is outside [0, ", vocab_size,
                     ") (vocab_size=", vocab_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPromptGroups(const std::vector<PromptGroup>& groups,
                               int32_t vocab_size, bool check_labels) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const PromptGroup& group = groups[g];
    for (const TokenId id : group.prefix) {
      RETURN_IF_ERROR(
          CheckId(id, vocab_size, absl::StrCat("groups[", g, "].prefix")));
    }
    for (size_t s = 0; s < group.suffixes.size(); ++s) {
      if (group.prefix.empty() && group.suffixes[s].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "groups[", g, "].suffixes[", s, "]: the prompt has no tokens"));
      }
      for (const TokenId id : group.suffixes[s]) {
        RETURN_IF_ERROR(CheckId(
            id, vocab_size, absl::StrCat("groups[", g, "].suffixes[", s, "]")));
      }
    }
    if (!check_labels) continue;
    for (size_t k = 0; k < group.label_ids.size(); ++k) {
      RETURN_IF_ERROR(
          CheckId(group.label_ids[k], vocab_size,
                  absl::StrCat("groups[", g, "].label_ids[", k, "]")));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckResolvedLayers(const std::vector<int32_t>& layers,
                                 int32_t n_layers) {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] > n_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "]: ", layers[i], " is outside [0, ",
                       n_layers, "] for a model with n_layers=", n_layers));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ResolveLayer(int32_t layer, int32_t n_layers) {
  const int64_t resolved =
      layer < 0 ? static_cast<int64_t>(n_layers) + 1 + layer : layer;
  if (resolved < 0 || resolved > n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers: ", layer, " is outside [", -(n_layers + 1), ", ",
                     n_layers, "] for a model with n_layers=", n_layers));
  }
  return static_cast<int32_t>(resolved);
}

std::vector<std::string> CheckedLabels() {
  std::vector<std::string> labels;
  for (char c = 'A'; c <= 'Z'; ++c) labels.emplace_back(1, c);
  labels.emplace_back("Yes");
  labels.emplace_back("No");
  for (char c = '1'; c <= '9'; ++c) labels.emplace_back(1, c);
  return labels;
}

absl::Status CheckLabelAgreement(
    const text::Tokenizer& local,
    const std::vector<std::vector<TokenId>>& remote) {
  const std::vector<std::string> labels = CheckedLabels();
  if (remote.size() != labels.size()) {
    return absl::InternalError("one id list per checked label expected");
  }
  std::vector<std::string> differ;
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StatusOr<std::vector<TokenId>> ids = local.Encode(labels[i]);
    if (!ids.ok()) return ids.status();
    if (*ids != remote[i]) differ.push_back(labels[i]);
  }
  if (differ.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the two tokenizers disagree on label tokens [",
                   absl::StrJoin(differ, ", "),
                   "]; a composite backend needs identical label ids"));
}

}  // namespace mesa_anyjev
