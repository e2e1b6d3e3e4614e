// What a Decider is built with and what one call may override: the
// package's Decider constructor arguments with its defaults, per-call
// overrides and returns, and the options of a head fit and of observe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/level.h"
#include "common/decision/permute.h"
#include "common/decision/prompt_builder.h"
#include "common/decision/running_priors.h"

namespace mesa_anyjev::config {
struct DecisionsConfig;
struct DeciderConfig;
}  // namespace mesa_anyjev::config

namespace mesa_anyjev::decision {

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
  // package's rule); false: only from a head fit on this exact key, since
  // any noul routes to any noul head (docs/reference.md, Exact-key levels).
  bool auto_routes_reworded = true;
  // Prompts per backend call; larger requests are split.
  int max_prompts_per_call = 256;

  bool operator==(const DeciderOptions&) const = default;
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
  // L2 only from a head of this exact key (docs/reference.md, Exact-key
  // levels): a head routed from a rewording or an option set counts as no
  // head, so auto serves L1 or L0 and an explicit L2 is refused naming the
  // key.
  bool exact_heads = false;
  bool return_prompts = false;
  bool return_details = false;  // p_pos_raw and prior in diagnostics
  // When set, the batch priors are the caller's: read from and written back
  // to this table, and the decider's running priors are not touched. A call
  // is then a function of its arguments, whichever daemon serves it.
  PriorTable* carried_priors = nullptr;
};

// The decider a configuration describes: the daemon's from decisions.*, the
// CLI's in-process one from decider.*. Both go through one mapping; a key
// one section lacks takes the other section's default (decider.* has no
// canonical_order or auto_routes_reworded, decisions.* no max_permutations),
// so the two deciders are equal by construction until a key says otherwise.
// The CLI keeps to exact keys per call instead (exact_heads), as it asks the
// daemon to. The config validator has checked every value.
DeciderOptions DeciderOptionsFrom(const config::DecisionsConfig& decisions);
DeciderOptions DeciderOptionsFrom(const config::DeciderConfig& decider);
// The decider fits run on: `serving` without the rotation budget, so an L1
// artifact freezes the prior it was read with (a rotation's prior is per
// shift over the states that read it).
DeciderOptions ForFits(DeciderOptions serving);

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

}  // namespace mesa_anyjev::decision
