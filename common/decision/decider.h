// The Decider (decision-method.md 4-9; anyjev 0.2.0 decider.Decider): from
// states and typed questions to decisions at a level, over a Backend.
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
// It keeps, per question key, the running batch prior, the content-free
// prior cache, L1 artifacts, L2 heads, adaptation statistics, observations
// and adaptive-stop certificates; all of it is safe under concurrent
// callers. Artifacts export to and load from the heads-file JSON of
// decision-method.md 9, readable by the anyjev package.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"
#include "common/decision/artifact_store.h"
#include "common/decision/decision.h"
#include "common/decision/label_resolver.h"
#include "common/decision/level.h"
#include "common/decision/permute.h"
#include "common/decision/prompt_builder.h"
#include "common/decision/prompt_scorer.h"
#include "common/decision/question.h"
#include "common/decision/running_priors.h"
#include "common/decision/stopping.h"
#include "common/decision/temperature_scaler.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

namespace decider_internal {
class Registry;
struct ShiftReadout;
}  // namespace decider_internal

enum class PriorMode { kBatch, kContentFree, kNone };
enum class AdaptMode { kRouted, kAlways, kNever };
enum class StopStat { kLogit, kProb };

const char* PriorModeName(PriorMode mode);  // "batch", "content_free", "none"
absl::StatusOr<PriorMode> ParsePriorMode(std::string_view name);
absl::StatusOr<Combine> ParseCombine(std::string_view name);  // logmean|mean

// The anyjev Decider's constructor arguments, with its defaults.
struct DeciderOptions {
  PriorMode prior = PriorMode::kBatch;
  int min_prior_n = 8;
  // Exponent on the prior; unset = 0.75 for batch, 1 for content_free.
  std::optional<double> prior_strength;
  std::optional<int> max_permutations;  // consecutive shifts 0..n-1
  Combine combine = Combine::kLogMean;
  std::vector<std::string> cf_probes = {"N/A", "", "[MASK]"};
  bool record_content_free = false;
  std::string system = std::string(kDefaultSystem);
  bool canonical_order = false;
  // The rotation budget (unordered choice, K >= 3, level != raw).
  bool adaptive_shifts = false;
  int adaptive_min_shifts = 2;
  std::optional<double> adaptive_margin;
  StopStat adaptive_stat = StopStat::kLogit;
  double adaptive_target = 0.01;
  int adaptive_wave = 2;
  bool adaptive_spread_order = true;  // false: consecutive
  AdaptMode adapt = AdaptMode::kRouted;
  int adapt_min_n = 30;
  // auto serves L2 from a head reached by rewording or re-listing too (the
  // package's rule); false: only from a head fit on this exact key (the
  // reference system's rule, since any noul routes to any noul head).
  bool auto_routes_reworded = true;
  // Prompts per backend call; larger requests are split.
  int max_prompts_per_call = 256;
};

// Per-call overrides of DeciderOptions, and what to return.
struct DecideOptions {
  std::optional<PriorMode> prior;
  std::optional<Combine> combine;
  std::optional<bool> canonical_order;
  std::optional<int> max_permutations;
  std::optional<bool> adaptive_shifts;
  std::optional<double> adaptive_margin;
  // Refuse (FAILED_PRECONDITION) any question that would be served below.
  std::optional<Level> require;
  // L2 only from a head of this exact key (reference amendment A1): a head
  // routed from a rewording or an option set counts as no head, so auto
  // serves L1 or L0 and an explicit L2 is refused naming the key.
  bool exact_heads = false;
  bool return_prompts = false;
  bool return_details = false;  // p_pos_raw and prior in diagnostics
  // When set, the batch priors are the caller's: read from and written back
  // to this table, and the decider's running priors are not touched. A call
  // is then a function of its arguments, whichever daemon serves it.
  PriorTable* carried_priors = nullptr;
};

struct FitHeadOptions {
  std::vector<int> layers;  // absolute or negative; empty = default blocks
  std::vector<std::string> kinds = {"lda", "ridge"};
  int n_folds = 5;
  uint32_t seed = 0;
  std::string listing = "auto";  // auto | random | canonical
};

struct ObserveOptions {
  int fit_at = 30;
  double refit_factor = 2.0;
  FitHeadOptions fit;
};

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
  // question (K >= 3) from unlabelled states (decision-method.md 5.9).
  absl::StatusOr<StopCertificate> CalibrateAdaptive(
      const Question& question, const std::vector<std::string>& states,
      std::optional<double> target = std::nullopt, double delta = 0.05,
      Level level = Level::kL0, const CallControl& control = {});

  // Every listing's prior of the question key.
  void ResetPrior(const std::string& key) { priors_.ResetPrefix(key + "|"); }
  void ResetAllPriors() { priors_.ResetAll(); }
  // The batch prior accumulated for the question, [P, K], once it counts
  // min_prior_n states.
  // (The listing of the decider's own settings.)
  std::optional<Matrix> RunningPrior(const Question& question) const;
  // The L1 artifacts, heads, adaptation statistics and observations: what
  // Calibrate, FitHead and Observe store, and what files load and export.
  ArtifactStore& artifacts() { return artifacts_; }
  const ArtifactStore& artifacts() const { return artifacts_; }
  const std::string& model_name() const { return backend_->identity().name; }

 private:
  struct Effective;  // DeciderOptions with one call's overrides applied
  struct Listing;    // a question as a call reads it: labels, shifts, key
  struct PriorChoice;
  struct StopRule {  // the rotation budget's: stop at threshold on stat
    double threshold;
    StopStat stat;
  };
  struct MarginTraces {  // [state][shifts read - 1]
    std::vector<std::vector<double>> margins;
    std::vector<std::vector<int>> winners;
  };
  class Rotation;  // one question's shifts read in waves

  // --- A call's settings and what it may serve ---
  Effective Resolve(const DecideOptions& call) const;
  // Takes `question`'s L1 artifact and head route into `eff` (a route from
  // another key counts as none under exact_heads).
  void Snapshot(const Question& question, bool exact_heads,
                Effective* eff) const;
  // The call's snapshot (Effective::artifacts / routes), else live.
  std::shared_ptr<const TemperatureScaler> ArtifactFor(
      const Effective& eff, const std::string& key) const;
  std::optional<RoutedHead> RouteFor(const Effective& eff,
                                     const Question& question) const;
  absl::StatusOr<Level> ServedLevelFor(const Effective& eff,
                                       const Question& question,
                                       Level requested) const;
  absl::Status CheckQuestion(const Question& question, Level served) const;

  // --- Decide's steps (decider.cc) ---
  // The running accumulator of each listing a call reads, as the call found
  // it (none yet: nullopt).
  using PriorsSeen = std::map<std::string, std::optional<PriorAccumulator>>;
  // The level each question is served at, checked against `require`, K and
  // its labels before any model call.
  absl::StatusOr<std::vector<Level>> ServeLevels(
      const std::vector<Question>& questions, Level level,
      const std::optional<Level>& require, const Effective& eff);
  // From the caller's table when the call carries one, else the decider's.
  PriorsSeen PriorsBefore(const std::vector<Question>& questions,
                          const std::vector<Level>& served,
                          const Effective& eff,
                          const PriorTable* carried) const;
  // What a call added to its staged priors, written back where they came
  // from.
  void KeepPriors(const PriorsSeen& before, const RunningPriors& staged,
                  PriorTable* carried);
  // Dispatch of one concrete level (not auto) over its questions.
  absl::StatusOr<std::vector<std::vector<Decision>>> RunLevel(
      const std::vector<std::string>& states,
      const std::vector<Question>& questions, Level level, const Effective& eff,
      RunningPriors* priors, const CallControl& control);

  // --- Label readouts: raw, L0, L1 (decider_readout.cc) ---
  // Every question at once, except adaptive ones.
  absl::StatusOr<std::vector<std::vector<Decision>>> RunReadout(
      const std::vector<std::string>& states,
      const std::vector<Question>& questions, Level level, const Effective& eff,
      RunningPriors* priors, const CallControl& control);
  // One question's decisions from its states' readouts; the batch joins
  // `priors` (not at raw).
  absl::StatusOr<std::vector<Decision>> ReadoutDecisions(
      const Listing& listing,
      const std::vector<decider_internal::ShiftReadout>& reads, Level level,
      const Effective& eff, const std::optional<Matrix>& content_free,
      RunningPriors* priors) const;
  absl::StatusOr<ResolvedLabels> LabelsFor(const Question& question);
  std::vector<std::vector<int>> Perms(const Question& question, Level level,
                                      const Effective& eff) const;
  // The question key and the listing its readouts come from: the content-
  // free cache and the running priors are kept per listing, so per-call
  // canonical_order or max_permutations never mix readouts of two.
  std::string ListingKey(const Question& question,
                         const std::vector<std::vector<int>>& perms) const;
  absl::StatusOr<Listing> ListingFor(const Question& question, Level level,
                                     const Effective& eff);
  // Every state under each shift of `listing` into `prompts`: [state][shift]
  // rows.
  std::vector<std::vector<size_t>> AddPrompts(
      const std::vector<std::string>& states, const Listing& listing,
      decider_internal::Registry* prompts) const;
  text::ChatParts Render(const std::string& state, const Question& question,
                         const std::vector<int>& perm,
                         const ResolvedLabels& labels) const;
  // Label log-probs of every prompt, in one backend call (split only by
  // max_prompts_per_call).
  absl::StatusOr<std::vector<std::vector<double>>> Score(
      const decider_internal::Registry& prompts,
      const CallControl& control) const;
  // Whether a call reads content-free priors (L0's mode, or recording).
  bool WantsContentFree(Level level, const Effective& eff) const;
  // The content-free prior [P, K] of each listing when the call wants them
  // (else none): cached per listing; the probes of those not cached are
  // scored together in a call of their own, never beside real states.
  absl::StatusOr<std::vector<std::optional<Matrix>>> ContentFreePriors(
      const std::vector<Listing>& listings, Level level, const Effective& eff,
      const CallControl& control);
  // Every probe under each shift of `listing` into `probes`: [shift][probe]
  // rows.
  std::vector<std::vector<size_t>> AddProbes(
      const Listing& listing, decider_internal::Registry* probes) const;
  PriorChoice ChoosePrior(const Listing& listing, Level level,
                          const Effective& eff) const;
  double Strength(const Effective& eff) const;
  // An L0 decision calibrated with the question's temperature (L1).
  absl::StatusOr<Decision> ApplyL1(const Question& question,
                                   const Effective& eff,
                                   Decision decision) const;
  // Stamps the question, a score's value and the prompt's hash.
  Decision Decorate(Decision decision, const Question& question,
                    const std::string& state,
                    const ResolvedLabels& labels) const;

  // --- The rotation budget (decider_adaptive.cc) ---
  absl::StatusOr<std::vector<Decision>> RunAdaptiveChoice(
      const std::vector<std::string>& states, const Question& question,
      Level level, const Effective& eff, RunningPriors* priors,
      const CallControl& control);
  // Each state's decision from what it read once the waves stopped.
  absl::StatusOr<std::vector<Decision>> RotationDecisions(
      const std::vector<std::string>& states, const Rotation& rotation,
      Level level, const Effective& eff, const StopRule& rule) const;
  // CalibrateAdaptive's reading: every shift one at a time, each state's
  // margin and winner after each; the reads join the running priors.
  absl::StatusOr<MarginTraces> TraceMargins(
      const std::vector<std::string>& states, const Question& question,
      Level level, const Effective& eff, const CallControl& control);
  absl::StatusOr<Rotation> StartRotation(size_t n_states,
                                         const Question& question, Level level,
                                         const Effective& eff,
                                         const RunningPriors& priors,
                                         const CallControl& control);
  // One backend call: each active state under each of `shifts`, shift by
  // shift.
  absl::StatusOr<std::vector<std::vector<double>>> ScoreWave(
      const std::vector<std::string>& states, const Listing& listing,
      const std::vector<int>& shifts, const std::vector<size_t>& active,
      const CallControl& control) const;
  StopRule StopRuleFor(const Question& question, const Effective& eff) const;

  // --- L2 (decider_heads.cc, decider_learning.cc) ---
  struct HeadUsed {  // the routed head, or its adapted copy
    std::optional<LinearHead> adapted;
    int64_t n_seen = 0;  // states the adaptation statistics count
  };
  absl::StatusOr<std::vector<std::vector<Decision>>> RunHeads(
      const std::vector<std::string>& states,
      const std::vector<Question>& questions, const Effective& eff,
      const CallControl& control);
  absl::StatusOr<std::vector<Decision>> HeadDecisions(
      const std::vector<std::string>& states, const Question& question,
      const Effective& eff, const CallControl& control);
  // The head as the call applies it: re-standardised on the states the key
  // was asked on when adaptation applies (AdaptMode) and counts adapt_min_n
  // of them; the call's features are kept in `eff` for after it succeeds.
  HeadUsed HeadFor(const Question& question, const RoutedHead& routed,
                   const Matrix& features, const Effective& eff) const;
  // Hidden states [N, d] per layer of the states under `perms` (identity
  // when empty).
  absl::StatusOr<std::vector<Matrix>> Features(
      const Question& question, const std::vector<std::string>& states,
      const std::vector<int32_t>& layers,
      const std::vector<std::vector<int>>& perms, const CallControl& control);
  Backend* const backend_;
  const DeciderOptions options_;
  const PromptScorer scorer_;
  RunningPriors priors_;
  ArtifactStore artifacts_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ResolvedLabels> labels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Matrix> cf_cache_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, StopCertificate> stop_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
