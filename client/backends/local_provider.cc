#include "client/backends/local_provider.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {

LocalProvider::LocalProvider(std::unique_ptr<Backend> backend,
                             ProviderInfo info,
                             decision::DeciderOptions options,
                             std::function<int64_t()> missing)
    : backend_(std::move(backend)),
      counting_(backend_.get()),
      info_(std::move(info)),
      fit_options_(decision::ForFits(options)),
      decider_(&counting_, std::move(options)),
      missing_(std::move(missing)) {}

namespace {

// One question's decisions by `decider`, keyed as the daemon's are for the
// CLI: a head of another key never serves them.
absl::StatusOr<std::vector<decision::Decision>> DecideOne(
    decision::Decider& decider, const std::vector<std::string>& states,
    const decision::Question& question, decision::Level level) {
  if (states.empty()) return std::vector<decision::Decision>{};
  decision::DecideOptions options;
  options.exact_heads = true;
  ASSIGN_OR_RETURN(auto decided,
                   decider.Decide(states, {question}, level, options));
  std::vector<decision::Decision> out;
  out.reserve(decided.size());
  for (auto& row : decided) out.push_back(std::move(row.front()));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<decision::Decision>> LocalProvider::DecideBatch(
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level) {
  return DecideOne(decider_, states, question, level);
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
LocalProvider::DecideCall(const std::vector<std::string>& states,
                          const std::vector<decision::Question>& questions,
                          decision::Level level) {
  if (states.empty()) return std::vector<std::vector<decision::Decision>>{};
  decision::PriorTable own;  // none in: the prior is these states'
  decision::DecideOptions options;
  options.carried_priors = &own;
  options.exact_heads = true;  // keyed as the daemon's are for the CLI
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
  return scratch.artifacts().Export(/*include_observations=*/false);
}

absl::StatusOr<std::vector<decision::Decision>> LocalProvider::DecideWith(
    const nlohmann::ordered_json& artifacts,
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level) {
  decision::Decider scratch(&counting_, fit_options_);
  RETURN_IF_ERROR(scratch.artifacts().Load(artifacts).status());
  return DecideOne(scratch, states, question, level);
}

absl::StatusOr<int> LocalProvider::LoadArtifacts(
    const nlohmann::ordered_json& file) {
  return decider_.artifacts().Load(file);
}

}  // namespace mesa_anyjev::client
