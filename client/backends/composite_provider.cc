#include "client/backends/composite_provider.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {

using decision::Level;

absl::Status CheckDaemonLabels(const text::Tokenizer& local,
                               DaemonClient& daemon) {
  ASSIGN_OR_RETURN(const auto remote, daemon.Tokenize(CheckedLabels()));
  return CheckLabelAgreement(local, remote);
}

absl::StatusOr<std::unique_ptr<CompositeProvider>> CompositeProvider::Create(
    std::unique_ptr<LocalProvider> gateway,
    std::unique_ptr<DaemonProvider> daemon) {
  RETURN_IF_ERROR(
      CheckDaemonLabels(gateway->backend().tokenizer(), daemon->client()));
  return std::unique_ptr<CompositeProvider>(
      new CompositeProvider(std::move(gateway), std::move(daemon)));
}

CompositeProvider::CompositeProvider(std::unique_ptr<LocalProvider> gateway,
                                     std::unique_ptr<DaemonProvider> daemon)
    : gateway_(std::move(gateway)), daemon_(std::move(daemon)) {
  info_.kind = "composite";
  info_.model = daemon_->info().model;  // bundles are keyed by the local model
  info_.served_model = gateway_->info().served_model;
  // The readout below L2 is still the gateway's top 20.
  info_.max_choice_k = gateway_->info().max_choice_k;
  info_.hidden_states = daemon_->info().hidden_states;
  info_.logprob_top_k = gateway_->info().logprob_top_k;
  info_.max_call_states = daemon_->info().max_call_states;
  info_.max_call_questions = daemon_->info().max_call_questions;
}

absl::StatusOr<std::vector<decision::Decision>> CompositeProvider::DecideBatch(
    const std::vector<std::string>& states, const decision::Question& question,
    Level level) {
  if (level == Level::kL2) return daemon_->DecideBatch(states, question, level);
  if (level != Level::kAuto) {
    return gateway_->DecideBatch(states, question, level);
  }
  // The daemon refuses before any work when it has no head to serve L2.
  auto l2 =
      daemon_->DecideRequiring(states, question, Level::kAuto, Level::kL2);
  if (l2.ok() || l2.status().code() != absl::StatusCode::kFailedPrecondition) {
    return l2;
  }
  return gateway_->DecideBatch(states, question, Level::kAuto);
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
CompositeProvider::DecideCall(const std::vector<std::string>& states,
                              const std::vector<decision::Question>& questions,
                              Level level) {
  std::vector<std::vector<decision::Decision>> out(states.size());
  for (const decision::Question& question : questions) {
    absl::StatusOr<std::vector<std::vector<decision::Decision>>> column;
    if (level == Level::kL2) {
      column = daemon_->DecideCall(states, {question}, level);
    } else if (level != Level::kAuto) {
      column = gateway_->DecideCall(states, {question}, level);
    } else {
      column = daemon_->DecideCallRequiring(states, {question}, Level::kAuto,
                                            Level::kL2);
      if (absl::IsFailedPrecondition(column.status())) {
        column = gateway_->DecideCall(states, {question}, Level::kAuto);
      }
    }
    if (!column.ok()) return column.status();
    for (size_t s = 0; s < states.size(); ++s) {
      out[s].push_back(std::move((*column)[s].front()));
    }
  }
  return out;
}

absl::Status CompositeProvider::ResetRunningPriors() {
  RETURN_IF_ERROR(gateway_->ResetRunningPriors());
  return daemon_->ResetRunningPriors();
}

absl::StatusOr<nlohmann::ordered_json> CompositeProvider::FitArtifact(
    const decision::Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, Level level) {
  if (level == Level::kL2) {
    return daemon_->FitArtifact(question, states, labels, level);
  }
  return gateway_->FitArtifact(question, states, labels, level);
}

absl::StatusOr<std::vector<decision::Decision>> CompositeProvider::DecideWith(
    const nlohmann::ordered_json& artifacts,
    const std::vector<std::string>& states, const decision::Question& question,
    Level level) {
  if (level == Level::kL2) {
    return daemon_->DecideWith(artifacts, states, question, level);
  }
  return gateway_->DecideWith(artifacts, states, question, level);
}

}  // namespace mesa_anyjev::client
