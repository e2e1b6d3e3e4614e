#include "client/backends/daemon_provider.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {

absl::StatusOr<std::unique_ptr<DaemonProvider>> DaemonProvider::Create(
    const config::Config& config, std::shared_ptr<const RetryRule> retries) {
  ASSIGN_OR_RETURN(auto client, DaemonClient::Create(config.client));
  if (retries != nullptr) client->EnableRetries(std::move(retries));
  absl::StatusOr<DaemonInfo> daemon = client->Info();
  if (!daemon.ok()) return daemon.status();
  if (!config.backend.hf_model.empty() &&
      config.backend.hf_model != daemon->identity.name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mesa-anyjevd at ", config.client.address, " serves '",
        daemon->identity.name, "' but backend.hf_model is '",
        config.backend.hf_model,
        "' (bundles are keyed by it): set backend.hf_model to '",
        daemon->identity.name, "', or leave it empty to take the daemon's"));
  }
  ProviderInfo info;
  info.kind = "hf";
  info.model = daemon->identity.name;
  info.identity = daemon->identity.identity;
  if (daemon->capabilities.hidden_states) {
    info.n_layers = daemon->capabilities.n_layers;
    info.hidden_size = daemon->capabilities.hidden_size;
  }
  info.max_choice_k = daemon->capabilities.max_choice_k;
  info.hidden_states = daemon->capabilities.hidden_states;
  info.max_call_states = daemon->limits.max_decide_states;
  info.max_call_questions = daemon->limits.max_decide_questions;
  info.concurrent_calls = true;
  // The daemon refuses more states per Decide than its limit: split under
  // the limit it reports.
  const int32_t max_states = daemon->limits.max_decide_states;
  return std::unique_ptr<DaemonProvider>(
      new DaemonProvider(std::move(client), *std::move(daemon), std::move(info),
                         max_states, config.client.priors == "run"));
}

absl::StatusOr<std::vector<decision::Decision>> DaemonProvider::DecideBatch(
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level) {
  return Run(states, question, level, std::nullopt);
}

absl::StatusOr<std::vector<decision::Decision>> DaemonProvider::DecideRequiring(
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level, decision::Level require) {
  return Run(states, question, level, require);
}

absl::StatusOr<std::vector<decision::Decision>> DaemonProvider::Run(
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level, std::optional<decision::Level> require,
    const nlohmann::ordered_json* scratch_artifacts) {
  std::vector<decision::Decision> out;
  out.reserve(states.size());
  for (size_t begin = 0; begin < states.size(); begin += max_states_) {
    const size_t end = std::min(states.size(), begin + max_states_);
    const std::vector<std::string> chunk(states.begin() + begin,
                                         states.begin() + end);
    // A scratch decider (a fold's artifacts) starts its priors afresh, as
    // the reference's fit_decider does; only serving calls carry the run's.
    const bool carry = run_priors_ && scratch_artifacts == nullptr;
    const decision::PriorTable before =
        carry ? priors_.Table() : decision::PriorTable{};
    decision::PriorTable after = before;
    ASSIGN_OR_RETURN(auto decided, client_->Decide(chunk, {question}, level,
                                                   require, scratch_artifacts,
                                                   carry ? &after : nullptr));
    for (const auto& [listing, acc] : after) {
      const auto base = before.find(listing);
      priors_.AddChange(
          listing,
          base == before.end()
              ? std::nullopt
              : std::optional<decision::PriorAccumulator>(base->second),
          acc);
    }
    for (auto& row : decided) {
      prompts_.fetch_add(row.front().diagnostics.prompts);
      out.push_back(std::move(row.front()));
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
DaemonProvider::DecideCall(const std::vector<std::string>& states,
                           const std::vector<decision::Question>& questions,
                           decision::Level level) {
  return DecideCallRequiring(states, questions, level, std::nullopt);
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
DaemonProvider::DecideCallRequiring(
    const std::vector<std::string>& states,
    const std::vector<decision::Question>& questions, decision::Level level,
    std::optional<decision::Level> require) {
  decision::PriorTable own;  // none in: the prior is these states'
  ASSIGN_OR_RETURN(auto decided, client_->Decide(states, questions, level,
                                                 require, nullptr, &own));
  for (const auto& row : decided) {
    for (const decision::Decision& d : row) {
      prompts_.fetch_add(d.diagnostics.prompts);
    }
  }
  return decided;
}

absl::StatusOr<nlohmann::ordered_json> DaemonProvider::FitArtifact(
    const decision::Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, decision::Level level) {
  if (level != decision::Level::kL1 && level != decision::Level::kL2) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot fit level '", decision::LevelName(level), "'"));
  }
  return client_->FitDryRun(question, states, labels, level);
}

absl::StatusOr<std::vector<decision::Decision>> DaemonProvider::DecideWith(
    const nlohmann::ordered_json& artifacts,
    const std::vector<std::string>& states, const decision::Question& question,
    decision::Level level) {
  return Run(states, question, level, std::nullopt, &artifacts);
}

absl::Status DaemonProvider::ResetRunningPriors() {
  if (run_priors_) {
    priors_.ResetAll();  // the daemon's are other callers' business
    return absl::OkStatus();
  }
  return client_->ResetPriors();
}

}  // namespace mesa_anyjev::client
