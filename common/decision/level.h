// Decision levels (docs/decision.md, Levels): what a decision was
// served at, ranked raw < L0 < L1 < L2; "auto" is a request, never a result.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::decision {

enum class Level { kRaw, kL0, kL1, kL2, kAuto };

// "raw", "L0", "L1", "L2", "auto".
const char* LevelName(Level level);
// The names above, exactly; anything else is INVALID_ARGUMENT naming it.
absl::StatusOr<Level> ParseLevel(std::string_view name);
// raw 0, L0 1, L1 2, L2 3 (auto has no rank: -1).
int LevelRank(Level level);

}  // namespace mesa_anyjev::decision
