#include "client/backends/local_provider.h"

#include <utility>

#include "absl/strings/str_cat.h"
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
  // otherwise (docs/reference.md, Exact-key levels).
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
      fit_options_(options),
      decider_(&counting_, std::move(options)),
      missing_(std::move(missing)) {
  fit_options_.adaptive_shifts = false;
}

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

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
LocalProvider::DecideCall(const std::vector<std::string>& states,
                          const std::vector<decision::Question>& questions,
                          decision::Level level) {
  if (states.empty()) return std::vector<std::vector<decision::Decision>>{};
  decision::PriorTable own;  // none in: the prior is these states'
  decision::DecideOptions options;
  options.carried_priors = &own;
  return decider_.Decide(states, questions, level, options);
}

absl::Status LocalProvider::ResetRunningPriors() {
  decider_.ResetAllPriors();
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::ordered_json> LocalProvider::FitArtifact(
    const decision::Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, decision::Level level) {
  decision::Decider scratch(&counting_, fit_options_);
  switch (level) {
    case decision::Level::kL1:
      RETURN_IF_ERROR(scratch.Calibrate(question, states, labels).status());
      break;
    case decision::Level::kL2:
      RETURN_IF_ERROR(scratch.FitHead(question, states, labels).status());
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot fit level '", decision::LevelName(level), "'"));
  }
  return scratch.ExportArtifacts(/*include_observations=*/false);
}

absl::StatusOr<std::vector<decision::Decision>> LocalProvider::DecideWith(
    const nlohmann::ordered_json& artifacts,
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level) {
  decision::Decider scratch(&counting_, fit_options_);
  RETURN_IF_ERROR(scratch.LoadArtifacts(artifacts).status());
  if (states.empty()) return std::vector<decision::Decision>{};
  ASSIGN_OR_RETURN(auto decided, scratch.Decide(states, {question}, level));
  std::vector<decision::Decision> out;
  out.reserve(decided.size());
  for (auto& row : decided) out.push_back(std::move(row.front()));
  return out;
}

absl::StatusOr<int> LocalProvider::LoadArtifacts(
    const nlohmann::ordered_json& file) {
  return decider_.LoadArtifacts(file);
}

}  // namespace mesa_anyjev::client
