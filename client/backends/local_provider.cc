#include "client/backends/local_provider.h"

#include <utility>

#include "common/status/status_macros.h"

namespace mesa_anyjev::client {

decision::DeciderOptions DeciderOptionsFromConfig(
    const config::DeciderConfig& config) {
  decision::DeciderOptions options;
  // The config validator admits only the three names.
  options.prior = decision::ParsePriorMode(config.prior)
                      .value_or(decision::PriorMode::kBatch);
  options.adaptive_shifts = config.adaptive_shifts;
  if (config.max_permutations > 0) {
    options.max_permutations = config.max_permutations;
  }
  // A head serves only its own key: any noul would route to any noul head
  // otherwise (reference-system.md 7.2, A1).
  options.auto_routes_reworded = false;
  return options;
}

LocalProvider::LocalProvider(std::unique_ptr<Backend> backend,
                             ProviderInfo info,
                             decision::DeciderOptions options,
                             std::function<int64_t()> missing)
    : backend_(std::move(backend)),
      counting_(backend_.get()),
      info_(std::move(info)),
      decider_(&counting_, std::move(options)),
      missing_(std::move(missing)) {}

absl::StatusOr<std::vector<decision::Decision>> LocalProvider::DecideBatch(
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level) {
  if (states.empty()) return std::vector<decision::Decision>{};
  ASSIGN_OR_RETURN(auto decided, decider_.Decide(states, {question}, level));
  std::vector<decision::Decision> out;
  out.reserve(decided.size());
  for (auto& row : decided) out.push_back(std::move(row.front()));
  return out;
}

absl::Status LocalProvider::ResetRunningPriors() {
  decider_.ResetAllPriors();
  return absl::OkStatus();
}

absl::StatusOr<int> LocalProvider::LoadArtifacts(
    const nlohmann::ordered_json& file) {
  return decider_.LoadArtifacts(file);
}

}  // namespace mesa_anyjev::client
