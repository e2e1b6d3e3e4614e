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
  info_.identity = daemon_->info().identity;
  info_.n_layers = daemon_->info().n_layers;
  info_.hidden_size = daemon_->info().hidden_size;
  info_.served_model = gateway_->info().served_model;
  // The readout below L2 is still the gateway's top 20.
  info_.max_choice_k = gateway_->info().max_choice_k;
  info_.hidden_states = daemon_->info().hidden_states;
  info_.logprob_top_k = gateway_->info().logprob_top_k;
  info_.max_call_states = daemon_->info().max_call_states;
  info_.max_call_questions = daemon_->info().max_call_questions;
}

namespace {

// A gateway failure that the daemon may stand in for: the gateway did not
// answer (down, breaker open) or not in time. Refusals (a bad request, a
// level it cannot serve) are the gateway's answer and stay.
bool GatewayDown(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

void MarkServedBy(std::vector<decision::Decision>& decisions,
                  const std::string& model, const std::string& why) {
  for (decision::Decision& d : decisions) {
    d.diagnostics.served_by = model;
    d.diagnostics.failover = why;
  }
}

}  // namespace

template <typename Result, typename Daemon, typename Mark>
Result CompositeProvider::OrFailover(Result gateway,
                                     const decision::Question& question,
                                     Daemon daemon, Mark mark) {
  if (gateway.ok() || !GatewayDown(gateway.status()) ||
      !failover_keys_.contains(question.key())) {
    return gateway;
  }
  Result served = daemon();
  if (!served.ok()) return gateway;  // the gateway's failure is the news
  mark(*served, absl::StrCat("gateway ",
                             absl::StatusCodeToString(gateway.status().code()),
                             ": ", gateway.status().message()));
  return served;
}

absl::StatusOr<std::vector<decision::Decision>> CompositeProvider::DecideBatch(
    const std::vector<std::string>& states, const decision::Question& question,
    Level level) {
  if (level == Level::kL2) return daemon_->DecideBatch(states, question, level);
  const std::string& model = daemon_->info().model;
  auto mark = [&](std::vector<decision::Decision>& decided,
                  const std::string& why) {
    MarkServedBy(decided, model, why);
  };
  if (level != Level::kAuto) {
    return OrFailover(
        gateway_->DecideBatch(states, question, level), question,
        [&] { return daemon_->DecideBatch(states, question, level); }, mark);
  }
  // The daemon refuses before any work when it has no head to serve L2.
  auto l2 =
      daemon_->DecideRequiring(states, question, Level::kAuto, Level::kL2);
  if (l2.ok() || l2.status().code() != absl::StatusCode::kFailedPrecondition) {
    return l2;
  }
  return OrFailover(
      gateway_->DecideBatch(states, question, Level::kAuto), question,
      [&] { return daemon_->DecideBatch(states, question, Level::kAuto); },
      mark);
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
CompositeProvider::DecideCall(const std::vector<std::string>& states,
                              const std::vector<decision::Question>& questions,
                              Level level) {
  std::vector<std::vector<decision::Decision>> out(states.size());
  for (const decision::Question& question : questions) {
    absl::StatusOr<std::vector<std::vector<decision::Decision>>> column;
    const Level asked = level;
    auto on_daemon = [&] {
      return daemon_->DecideCall(states, {question}, asked);
    };
    auto mark = [&](std::vector<std::vector<decision::Decision>>& decided,
                    const std::string& why) {
      for (auto& row : decided) MarkServedBy(row, daemon_->info().model, why);
    };
    if (level == Level::kL2) {
      column = daemon_->DecideCall(states, {question}, level);
    } else if (level != Level::kAuto) {
      column = OrFailover(gateway_->DecideCall(states, {question}, level),
                          question, on_daemon, mark);
    } else {
      column = daemon_->DecideCallRequiring(states, {question}, Level::kAuto,
                                            Level::kL2);
      if (absl::IsFailedPrecondition(column.status())) {
        column =
            OrFailover(gateway_->DecideCall(states, {question}, Level::kAuto),
                       question, on_daemon, mark);
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
