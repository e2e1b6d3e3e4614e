// The enum names of the decider's options (see decider_options.h).
#include "common/decision/decider_options.h"

#include "absl/strings/str_cat.h"

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

}  // namespace mesa_anyjev::decision
