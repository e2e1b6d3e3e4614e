#include "common/backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mesa_anyjev {

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
