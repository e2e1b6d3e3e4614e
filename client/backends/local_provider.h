// The provider that runs the decider in this process over a Backend here:
// the fake model, or the gateway (whose logprobs come over HTTP).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/backends/counting_backend.h"
#include "client/backends/provider.h"
#include "common/backend.h"
#include "common/decision/decider.h"

namespace mesa_anyjev::client {

class LocalProvider : public Provider {
 public:
  // `options`: decision::DeciderOptionsFrom(config.decider). Every Decide
  // serves L2 from a head of the question's own key only (exact_heads), as
  // the CLI asks of the daemon: any noul would route to any noul head
  // otherwise (docs/reference.md, Exact-key levels). `missing` reports the
  // backend's missing-label count (nullptr: none).
  LocalProvider(std::unique_ptr<Backend> backend, ProviderInfo info,
                decision::DeciderOptions options,
                std::function<int64_t()> missing = nullptr);

  const ProviderInfo& info() const override { return info_; }
  absl::StatusOr<std::vector<decision::Decision>> DecideBatch(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override;
  absl::StatusOr<std::vector<std::vector<decision::Decision>>> DecideCall(
      const std::vector<std::string>& states,
      const std::vector<decision::Question>& questions,
      decision::Level level) override;
  absl::Status ResetRunningPriors() override;
  absl::StatusOr<int> LoadArtifacts(
      const nlohmann::ordered_json& file) override;
  absl::StatusOr<nlohmann::ordered_json> FitArtifact(
      const decision::Question& question,
      const std::vector<std::string>& states, const std::vector<int>& labels,
      decision::Level level) override;
  absl::StatusOr<std::vector<decision::Decision>> DecideWith(
      const nlohmann::ordered_json& artifacts,
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override;
  int64_t prompts() const override { return counting_.prompts(); }
  int64_t missing_label_events() const override {
    return missing_ ? missing_() : 0;
  }

  Backend& backend() { return *backend_; }
  decision::Decider& decider() { return decider_; }

 private:
  std::unique_ptr<Backend> backend_;
  CountingBackend counting_;
  ProviderInfo info_;
  // Fits run without the rotation budget (decision::ForFits).
  decision::DeciderOptions fit_options_;
  decision::Decider decider_;
  std::function<int64_t()> missing_;
};

}  // namespace mesa_anyjev::client
