// The enum names of the decider's options, and the decider a configuration
// describes (see decider_options.h).
#include "common/decision/decider_options.h"

#include "absl/strings/str_cat.h"
#include "common/config/config.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::decision {

namespace {

constexpr util::EnumName<PriorMode> kPriorModeNames[] = {
    {PriorMode::kBatch, "batch"},
    {PriorMode::kContentFree, "content_free"},
    {PriorMode::kNone, "none"}};
static_assert(util::NamesEvery(kPriorModeNames, PriorMode::kNone));

constexpr util::EnumName<Combine> kCombineNames[] = {
    {Combine::kLogMean, "logmean"}, {Combine::kMean, "mean"}};
static_assert(util::NamesEvery(kCombineNames, Combine::kMean));

}  // namespace

const char* PriorModeName(PriorMode mode) {
  return util::NameIn(kPriorModeNames, mode);
}

absl::StatusOr<PriorMode> ParsePriorMode(std::string_view name) {
  if (auto mode = util::ValueIn(kPriorModeNames, name)) return *mode;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown prior '", std::string(name), "' (expected ",
                   util::NamesIn(kPriorModeNames), ")"));
}

absl::StatusOr<Combine> ParseCombine(std::string_view name) {
  if (auto combine = util::ValueIn(kCombineNames, name)) return *combine;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown combine '", std::string(name), "' (expected ",
                   util::NamesIn(kCombineNames), ")"));
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
