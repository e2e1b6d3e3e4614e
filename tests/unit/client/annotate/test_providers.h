// Providers for the annotate tests: a scripted one whose probabilities are a
// function of the question and the state (so a test sets exactly which terms
// fit), and a wrapper that reports a gateway-like max_choice_k over another
// provider. Fakes, not mocks: both implement the real Provider interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/backends/provider.h"
#include "common/decision/decision.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::annotate::testing {

// probs over the question's options for one state (the state parsed back
// from its rendered JSON).
using Script = std::function<std::vector<double>(
    const decision::Question& question, const nlohmann::json& state)>;

class ScriptedProvider : public client::Provider {
 public:
  explicit ScriptedProvider(Script script) : script_(std::move(script)) {
    info_.kind = "fake";
    info_.model = "scripted";
  }

  const client::ProviderInfo& info() const override { return info_; }
  absl::StatusOr<std::vector<decision::Decision>> DecideBatch(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override {
    ++batches_;
    std::vector<decision::Decision> out;
    for (const std::string& text : states) {
      decision::Decision d;
      d.question_id = question.name();
      d.question_key = question.key();
      d.kind = question.kind();
      d.options = question.options();
      d.level = level == decision::Level::kAuto ? decision::Level::kL0 : level;
      d.probs = script_(question, nlohmann::json::parse(text));
      d.diagnostics.prior_method = "batch";
      d.diagnostics.prompts = 1;
      out.push_back(std::move(d));
      ++prompts_;
    }
    if (missing_on_ == question.name()) missing_ += 1;
    return out;
  }
  absl::Status ResetRunningPriors() override { return absl::OkStatus(); }
  absl::StatusOr<int> LoadArtifacts(const nlohmann::ordered_json&) override {
    return 0;
  }
  int64_t prompts() const override { return prompts_; }
  int64_t missing_label_events() const override { return missing_; }

  // Every batch of `question_id` then reports one missing label.
  void MissLabelsOn(std::string question_id) {
    missing_on_ = std::move(question_id);
  }
  int batches() const { return batches_; }

 private:
  Script script_;
  client::ProviderInfo info_;
  int64_t prompts_ = 0;
  int64_t missing_ = 0;
  int batches_ = 0;
  std::string missing_on_;
};

// Another provider with a narrower max_choice_k, as the gateway reports.
class CappedProvider : public client::Provider {
 public:
  CappedProvider(std::unique_ptr<client::Provider> inner, int32_t cap)
      : inner_(std::move(inner)), info_(inner_->info()) {
    info_.max_choice_k = cap;
  }
  const client::ProviderInfo& info() const override { return info_; }
  absl::StatusOr<std::vector<decision::Decision>> DecideBatch(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) override {
    return inner_->DecideBatch(states, question, level);
  }
  absl::Status ResetRunningPriors() override {
    return inner_->ResetRunningPriors();
  }
  absl::StatusOr<int> LoadArtifacts(
      const nlohmann::ordered_json& file) override {
    return inner_->LoadArtifacts(file);
  }
  int64_t prompts() const override { return inner_->prompts(); }
  int64_t missing_label_events() const override {
    return inner_->missing_label_events();
  }

 private:
  std::unique_ptr<client::Provider> inner_;
  client::ProviderInfo info_;
};

// A noul's probs: {p, 1 - p}.
inline std::vector<double> Noul(double p) { return {p, 1.0 - p}; }

// A choice's probs with `top` at index `at` and the rest spread evenly.
inline std::vector<double> ChoiceAt(size_t k, size_t at, double top) {
  std::vector<double> probs(k, (1.0 - top) / static_cast<double>(k - 1));
  probs[at] = top;
  return probs;
}

}  // namespace mesa_anyjev::annotate::testing
