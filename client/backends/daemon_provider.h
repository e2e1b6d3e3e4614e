// The hf provider: mesa-anyjevd over gRPC. The daemon's own decider serves
// every level on its local model (L2 from its heads, with early stop); this
// side only sends states and questions and counts the prompts it reports.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/backends/daemon_client.h"
#include "client/backends/provider.h"
#include "common/decision/running_priors.h"

namespace mesa_anyjev::client {

class DaemonProvider : public Provider {
 public:
  // Connects and reads the daemon's model info (UNAVAILABLE naming the
  // address when it does not answer); `retries`: MakeProvider's.
  static absl::StatusOr<std::unique_ptr<DaemonProvider>> Create(
      const config::Config& config,
      std::shared_ptr<const RetryRule> retries = nullptr);

  const ProviderInfo& info() const override { return info_; }
  absl::StatusOr<std::vector<decision::Decision>> DecideBatch(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override;
  // As DecideBatch, but refused (FAILED_PRECONDITION, before any work) when
  // the daemon would serve the question below `require`.
  absl::StatusOr<std::vector<decision::Decision>> DecideRequiring(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level,
      decision::Level require);
  // One Decide, carry_priors with none in (docs/rpc.md "Carried priors").
  absl::StatusOr<std::vector<std::vector<decision::Decision>>> DecideCall(
      const std::vector<std::string>& states,
      const std::vector<decision::Question>& questions,
      decision::Level level) override;
  // As DecideCall, refused (FAILED_PRECONDITION) below `require`.
  absl::StatusOr<std::vector<std::vector<decision::Decision>>>
  DecideCallRequiring(const std::vector<std::string>& states,
                      const std::vector<decision::Question>& questions,
                      decision::Level level,
                      std::optional<decision::Level> require);
  absl::Status ResetRunningPriors() override;
  // Fit with dry_run and Decide with artifacts_json (docs/rpc.md): the
  // daemon's serving decider is not touched.
  absl::StatusOr<nlohmann::ordered_json> FitArtifact(
      const decision::Question& question,
      const std::vector<std::string>& states, const std::vector<int>& labels,
      decision::Level level) override;
  absl::StatusOr<std::vector<decision::Decision>> DecideWith(
      const nlohmann::ordered_json& artifacts,
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override;
  int64_t prompts() const override { return prompts_.load(); }
  int64_t missing_label_events() const override { return 0; }

  DaemonClient& client() { return *client_; }
  const DaemonInfo& daemon() const { return daemon_; }

 private:
  DaemonProvider(std::unique_ptr<DaemonClient> client, DaemonInfo daemon,
                 ProviderInfo info, int32_t max_states, bool run_priors)
      : client_(std::move(client)),
        daemon_(std::move(daemon)),
        info_(std::move(info)),
        max_states_(max_states),
        run_priors_(run_priors) {}

  absl::StatusOr<std::vector<decision::Decision>> Run(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level,
      std::optional<decision::Level> require,
      const nlohmann::ordered_json* scratch_artifacts = nullptr);

  std::unique_ptr<DaemonClient> client_;
  DaemonInfo daemon_;
  ProviderInfo info_;
  int32_t max_states_;
  // client.priors=run: this run's batch priors, carried in every Decide so
  // that whichever daemon answers, the decisions are the same.
  bool run_priors_;
  decision::RunningPriors priors_;
  std::atomic<int64_t> prompts_{0};
};

}  // namespace mesa_anyjev::client
