// The composite provider (docs/cli.md): raw, L0 and L1 read
// the gateway's logprobs through a decider here; L2 goes to the daemon,
// whose heads read its local model's hidden states. auto serves L2 where
// the daemon has a head for the question, else the gateway's best of L1
// and L0. Both sides must give the same ids for every label, or the
// composite refuses to start (CheckLabelAgreement of common/backend.h, the
// check the daemon's router runs too).
//
// Why a second composite beside common/composite_backend.h's
// CompositeBackend: that one joins two models under one decider (the
// router's, whose heads and bundles are its own); this one joins two
// deciders, so L2 is served by the daemon's decider with the daemon's own
// promoted heads, and hidden states never cross the wire to the CLI.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/backends/daemon_provider.h"
#include "client/backends/local_provider.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev::client {

// The composite's start check: the daemon's ids for CheckedLabels() through
// the shared CheckLabelAgreement against `local` (FAILED_PRECONDITION naming
// the labels that differ).
absl::Status CheckDaemonLabels(const text::Tokenizer& local,
                               DaemonClient& daemon);

class CompositeProvider : public Provider {
 public:
  // FAILED_PRECONDITION naming the labels when the tokenizers disagree.
  static absl::StatusOr<std::unique_ptr<CompositeProvider>> Create(
      std::unique_ptr<LocalProvider> gateway,
      std::unique_ptr<DaemonProvider> daemon);

  const ProviderInfo& info() const override { return info_; }
  absl::StatusOr<std::vector<decision::Decision>> DecideBatch(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override;
  // Question by question, each routed as DecideBatch routes it.
  absl::StatusOr<std::vector<std::vector<decision::Decision>>> DecideCall(
      const std::vector<std::string>& states,
      const std::vector<decision::Question>& questions,
      decision::Level level) override;
  absl::Status ResetRunningPriors() override;
  // L2 fits and decides on the daemon (hidden states), L1 on the gateway.
  absl::StatusOr<nlohmann::ordered_json> FitArtifact(
      const decision::Question& question,
      const std::vector<std::string>& states, const std::vector<int>& labels,
      decision::Level level) override;
  absl::StatusOr<std::vector<decision::Decision>> DecideWith(
      const nlohmann::ordered_json& artifacts,
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override;
  int64_t prompts() const override {
    return gateway_->prompts() + daemon_->prompts();
  }
  int64_t missing_label_events() const override {
    return gateway_->missing_label_events();
  }

  LocalProvider& gateway() { return *gateway_; }
  DaemonProvider& daemon() { return *daemon_; }

  // Question keys whose raw, L0 and L1 the daemon may serve when the
  // gateway fails a call with UNAVAILABLE or DEADLINE_EXCEEDED
  // (backend.failover_to_daemon, for the keys a current agreement record
  // covers: the command layer decides which). Each decision so served
  // names the daemon's model in diagnostics.served_by. None by default: a
  // failed gateway call fails.
  void AllowFailover(std::set<std::string> keys) {
    failover_keys_ = std::move(keys);
  }

 private:
  CompositeProvider(std::unique_ptr<LocalProvider> gateway,
                    std::unique_ptr<DaemonProvider> daemon);

  // `gateway`'s answer, or the daemon's (`daemon`) in its place when the
  // gateway failed over a question that may fail over; `mark` names the
  // daemon's model on each decision served so.
  template <typename Result, typename Daemon, typename Mark>
  Result OrFailover(Result gateway, const decision::Question& question,
                    Daemon daemon, Mark mark);

  std::unique_ptr<LocalProvider> gateway_;
  std::unique_ptr<DaemonProvider> daemon_;
  ProviderInfo info_;
  std::set<std::string> failover_keys_;
};

}  // namespace mesa_anyjev::client
