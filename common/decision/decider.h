// The Decider (docs/decision.md): from states and typed questions to
// decisions at a level, over a Backend.
//
//   raw   one prompt in the caller's order, restricted softmax
//   L0    cyclic shifts, a label prior (batch or content-free) divided out
//         per (shift, position), combined by log-mean (or mean); noul reads
//         its two phrasings, score one unpermuted prompt; optionally the
//         rotation budget (adaptive shifts) and canonical order
//   L1    L0 with the calibration set's frozen prior, then a temperature
//   L2    a closed-form head on the hidden state after one block
//   auto  L2 where a head routes, else L1 where an artifact exists, else L0
//
// Decide reads as its steps in decider.cc; each level's readout takes and
// returns values over a PromptReader (label_readout.h: raw, L0, L1;
// rotation.h: the rotation budget; head_readout.h: L2). What the decider
// keeps is in stores, each safe under concurrent callers: the running batch
// priors (RunningPriors), the content-free priors (ContentFreePriors), the
// certified stop thresholds (StopCertificates) and what it learned
// (ArtifactStore: L1 artifacts, heads, adaptation statistics and
// observations, loaded and exported as the heads-file JSON the anyjev
// package reads).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/decision/artifact_store.h"
#include "common/decision/content_free_priors.h"
#include "common/decision/decider_options.h"
#include "common/decision/decision.h"
#include "common/decision/level.h"
#include "common/decision/prompt_reader.h"
#include "common/decision/question.h"
#include "common/decision/running_priors.h"
#include "common/decision/stop_certificates.h"
#include "common/decision/stopping.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

struct CallSettings;
struct Listing;
class Rotation;

class Decider {
 public:
  // `backend` outlives the decider.
  explicit Decider(Backend* backend, DeciderOptions options = {});

  // Decisions for every (state, question): result[state][question]. States
  // are rendered texts. INVALID_ARGUMENT for a bad question (K over the
  // model's max_choice_k, a label that is not one token);
  // FAILED_PRECONDITION when a level cannot be served (no L1 artifact, no
  // head, no hidden states) or `require` is not met, naming what is missing.
  absl::StatusOr<std::vector<std::vector<Decision>>> Decide(
      const std::vector<std::string>& states,
      const std::vector<Question>& questions, Level level,
      const DecideOptions& options = {}, const CallControl& control = {});

  // The level `question` would be served at for `requested` (auto
  // resolved) by a Decide with `options` (exact_heads) now, or
  // FAILED_PRECONDITION naming what is missing.
  absl::StatusOr<Level> ServedLevel(const Question& question, Level requested,
                                    const DecideOptions& options = {}) const;

  // L1: L0 over the labelled states with a prior from them alone (the
  // running prior set aside, then merged back), a temperature fit on those
  // probabilities, the prior frozen with it. Returns the artifact JSON.
  absl::StatusOr<nlohmann::ordered_json> Calibrate(
      const Question& question, const std::vector<std::string>& states,
      const std::vector<int>& labels, const CallControl& control = {});

  // L2: a closed-form head on the hidden states of the labelled states;
  // returns the heads-file entry.
  absl::StatusOr<nlohmann::ordered_json> FitHead(
      const Question& question, const std::vector<std::string>& states,
      const std::vector<int>& labels, const FitHeadOptions& options = {},
      const CallControl& control = {});

  // Records one labelled state; fits the question's head when the count
  // reaches next_fit (max(fit_at, 8, 2K), then x refit_factor). Returns the
  // head entry when it fitted on this call.
  absl::StatusOr<std::optional<nlohmann::ordered_json>> Observe(
      const Question& question, const std::string& state, int label,
      const ObserveOptions& options = {}, const CallControl& control = {});

  // Certifies an adaptive-shift threshold for one unordered choice
  // question (K >= 3) from unlabelled states (docs/decision.md, Rotation
  // budget): every shift read one at a time, the cheapest threshold whose
  // disagreement with the full read is bounded under `target`.
  absl::StatusOr<StopCertificate> CalibrateAdaptive(
      const Question& question, const std::vector<std::string>& states,
      std::optional<double> target = std::nullopt, double delta = 0.05,
      Level level = Level::kL0, const CallControl& control = {});

  // The batch prior accumulated for the question under the decider's own
  // settings, [P, K], once it counts min_prior_n states. Running priors are
  // kept per tenant (CallControl::tenant): each tenant's calls read and add
  // to its own.
  std::optional<Matrix> RunningPrior(const Question& question,
                                     const std::string& tenant = "") const;
  // Forgets every listing's running prior of the question key, or all, of
  // one tenant.
  void ResetPrior(const std::string& key, const std::string& tenant = "") {
    priors_.Of(tenant).ResetPrefix(key + "|");
  }
  void ResetAllPriors(const std::string& tenant = "") {
    priors_.Of(tenant).ResetAll();
  }

  // The L1 artifacts, heads, adaptation statistics and observations: what
  // Calibrate, FitHead and Observe store, and what files load and export.
  ArtifactStore& artifacts() { return artifacts_; }
  const ArtifactStore& artifacts() const { return artifacts_; }
  const std::string& model_name() const { return backend_->identity().name; }

 private:
  using Grid = std::vector<std::vector<Decision>>;  // [state][question]
  // The L2 features a call read, per question key, for the adaptation
  // statistics once it succeeds.
  using Seen = std::vector<std::pair<std::string, Matrix>>;

  // --- What a question is served at (decider.cc) ---
  absl::StatusOr<Level> ServedLevelFor(const Question& question,
                                       Level requested,
                                       const ArtifactSnapshot& snapshot) const;
  // K against the model's max_choice_k (L2 reads no labels).
  absl::Status CheckQuestion(const Question& question, Level served) const;
  // The level of each question, checked against `require`, K and its
  // labels before any model call.
  absl::StatusOr<std::vector<Level>> ServeLevels(
      const std::vector<Question>& questions, Level level,
      const std::optional<Level>& require, const ArtifactSnapshot& snapshot);

  // --- Decide's readouts (decider.cc) ---
  // raw, L0 or L1 of `questions`: each that takes the rotation budget read
  // on its own, in waves, the rest together.
  absl::StatusOr<Grid> ReadLabels(const std::vector<std::string>& states,
                                  const std::vector<Question>& questions,
                                  Level level, const CallSettings& call,
                                  const ArtifactSnapshot& snapshot,
                                  RunningPriors* priors,
                                  const CallControl& control);
  absl::StatusOr<Grid> ReadTogether(const std::vector<std::string>& states,
                                    const std::vector<Question>& questions,
                                    Level level, const CallSettings& call,
                                    const ArtifactSnapshot& snapshot,
                                    RunningPriors* priors,
                                    const CallControl& control);
  absl::StatusOr<std::vector<Decision>> ReadRotating(
      const std::vector<std::string>& states, const Question& question,
      Level level, const CallSettings& call, const ArtifactSnapshot& snapshot,
      RunningPriors* priors, const CallControl& control);
  // One question's rotation: its listing, content-free prior and prior
  // choice, its reading order, and `priors` as the call found them.
  absl::StatusOr<Rotation> StartRotation(size_t n_states,
                                         const Question& question, Level level,
                                         const CallSettings& call,
                                         const ArtifactSnapshot& snapshot,
                                         const RunningPriors& priors,
                                         const CallControl& control);
  // L2 of `questions`, one backend call each; the features adaptation
  // reads go to `seen`.
  absl::StatusOr<Grid> ReadHeads(const std::vector<std::string>& states,
                                 const std::vector<Question>& questions,
                                 const CallSettings& call,
                                 const ArtifactSnapshot& snapshot, Seen* seen,
                                 const CallControl& control);
  // The content-free prior [P, K] of each listing when the call reads them
  // (L0's content_free mode, or record_content_free), else none.
  absl::StatusOr<std::vector<std::optional<Matrix>>> ContentFree(
      const std::vector<Listing>& listings, Level level,
      const CallSettings& call, const CallControl& control);

  Backend* const backend_;
  const DeciderOptions options_;
  PromptReader reader_;
  TenantPriors priors_;
  ContentFreePriors content_free_;
  StopCertificates stops_;
  ArtifactStore artifacts_;
};

}  // namespace mesa_anyjev::decision
