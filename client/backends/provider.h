// A Provider is what the CLI's commands decide through, whichever backend
// kind answers (docs/cli.md): fake (the fake model in
// process), gateway (an OpenAI-compatible server, top-20 logprobs),
// hf (mesa-anyjevd over gRPC: its own decider, local model, heads) and
// composite (raw/L0/L1 through the gateway, L2 through the daemon).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/backends/retry_rule.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/decision/decision.h"
#include "common/decision/level.h"
#include "common/decision/question.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::client {

struct ProviderInfo {
  std::string kind;          // fake | gateway | hf | composite
  std::string model;         // the model bundles are keyed by
  std::string served_model;  // the gateway's served name ("" without one)
  // The fingerprint its bundles' manifests record (the fake's, the
  // daemon's GetModelInfo.identity); "" for the gateway, which has none.
  std::string identity;
  // The hidden states' shape where L2 is served (0 without).
  int32_t n_layers = 0;
  int32_t hidden_size = 0;
  int32_t max_choice_k = kMaxChoiceOptions;
  bool hidden_states = false;  // L2 can be served
  int32_t logprob_top_k = 0;   // 0: the full vocabulary
  // What one DecideCall may carry (the daemon's limits; 0: no limit, the
  // decider runs here) and whether calls may run side by side (the
  // daemon's engine packs concurrent calls; a decider here runs them one at
  // a time).
  int32_t max_call_states = 0;
  int32_t max_call_questions = 0;
  bool concurrent_calls = false;
};

class Provider {
 public:
  virtual ~Provider() = default;

  virtual const ProviderInfo& info() const = 0;

  // One decision per state (rendered text) for `question` at `level` (auto
  // resolved per question key). FAILED_PRECONDITION when the level cannot
  // be served, naming what is missing.
  virtual absl::StatusOr<std::vector<decision::Decision>> DecideBatch(
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level) = 0;

  // One call of a pipeline run (decide --out): every question over
  // `states` at `level`, result[state][question], with batch priors from
  // these states alone (none carried in, none kept), so the decisions are a
  // function of this call's input whatever ran before or beside it. At most
  // info().max_call_states states and max_call_questions questions.
  virtual absl::StatusOr<std::vector<std::vector<decision::Decision>>>
  DecideCall(const std::vector<std::string>& states,
             const std::vector<decision::Question>& questions,
             decision::Level level);

  // Clears running batch priors, so that a run depends only on its input
  // and the loaded artifacts: two runs on one card give the same decisions.
  virtual absl::Status ResetRunningPriors() = 0;

  // Installs a heads/export file (docs/decision.md) in the decider this
  // process runs; returns the number of artifacts and heads loaded.
  // FAILED_PRECONDITION for the daemon's kinds (hf, composite): the daemon
  // loads its own promoted bundles and picks up promotes itself.
  virtual absl::StatusOr<int> LoadArtifacts(const nlohmann::ordered_json& file);

  // The reference's fit_decider: a fresh decider with this provider's
  // settings but no adaptive shifts fits an L1 temperature or an L2 head on
  // the labelled states; nothing is installed where this provider serves.
  // Returns that decider's heads/export file, which
  // DecideWith takes. UNIMPLEMENTED for a provider that
  // cannot fit; FAILED_PRECONDITION when the level cannot be fit here.
  virtual absl::StatusOr<nlohmann::ordered_json> FitArtifact(
      const decision::Question& question,
      const std::vector<std::string>& states, const std::vector<int>& labels,
      decision::Level level);
  // Decisions from a scratch decider (settings as FitArtifact's) holding only
  // the artifacts of `artifacts` (a heads/export file), over the same model:
  // how leave-one-card-out evaluates a fold without touching what serves.
  virtual absl::StatusOr<std::vector<decision::Decision>> DecideWith(
      const nlohmann::ordered_json& artifacts,
      const std::vector<std::string>& states,
      const decision::Question& question, decision::Level level);

  // Prompts scored so far (every prefill, as the reference's count_prompts)
  // and label ids missing from a top-k readout (gateway only).
  virtual int64_t prompts() const = 0;
  virtual int64_t missing_label_events() const = 0;
};

// The provider of `kind` ("" = backend.kind) built from `config`. With
// `retries`, every daemon call it makes, from the first, is sent again by
// that rule (retry_rule.h); without, each is one attempt, as a lone command
// makes.
absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(
    const config::Config& config, const std::string& kind = "",
    std::shared_ptr<const RetryRule> retries = nullptr);

}  // namespace mesa_anyjev::client
