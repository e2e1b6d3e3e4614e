// The enum names of the decider's options, and the decider a configuration
// describes (see decider_options.h).
#include "common/decision/decider_options.h"

#include "absl/strings/str_cat.h"
#include "common/config/config.h"

namespace mesa_anyjev::decision {

const char* PriorModeName(PriorMode mode) {
  switch (mode) {
    case PriorMode::kBatch:
      return "batch";
    case PriorMode::kContentFree:
      return "content_free";
    case PriorMode::kNone:
      return "none";
  }
  return "?";
}

absl::StatusOr<PriorMode> ParsePriorMode(std::string_view name) {
  for (PriorMode mode :
       {PriorMode::kBatch, PriorMode::kContentFree, PriorMode::kNone}) {
    if (name == PriorModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown prior '", std::string(name),
                   "' (expected batch, content_free or none)"));
}

absl::StatusOr<Combine> ParseCombine(std::string_view name) {
  if (name == "logmean") return Combine::kLogMean;
  if (name == "mean") return Combine::kMean;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown combine '", std::string(name), "' (expected logmean or mean)"));
}

namespace {

// The one mapping from configuration keys to a decider.
DeciderOptions FromKeys(std::string_view prior, bool canonical_order,
                        bool adaptive_shifts, int32_t max_permutations,
                        bool auto_routes_reworded) {
  DeciderOptions options;
  options.prior = ParsePriorMode(prior).value_or(options.prior);
  options.canonical_order = canonical_order;
  options.adaptive_shifts = adaptive_shifts;
  // 0 = every shift.
  if (max_permutations > 0) options.max_permutations = max_permutations;
  options.auto_routes_reworded = auto_routes_reworded;
  return options;
}

}  // namespace

DeciderOptions DeciderOptionsFrom(const config::DecisionsConfig& decisions) {
  return FromKeys(
      decisions.prior, decisions.canonical_order, decisions.adaptive_shifts,
      config::DeciderConfig{}.max_permutations, decisions.auto_routes_reworded);
}

DeciderOptions DeciderOptionsFrom(const config::DeciderConfig& decider) {
  const config::DecisionsConfig daemon;
  return FromKeys(decider.prior, daemon.canonical_order,
                  decider.adaptive_shifts, decider.max_permutations,
                  daemon.auto_routes_reworded);
}

DeciderOptions ForFits(DeciderOptions serving) {
  serving.adaptive_shifts = false;
  return serving;
}

}  // namespace mesa_anyjev::decision
