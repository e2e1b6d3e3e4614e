#include "common/backend.h"

#include "absl/strings/str_cat.h"

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

}  // namespace mesa_anyjev
