// Decision level names and ranks (see level.h).
#include "common/decision/level.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::decision {

const char* LevelName(Level level) {
  switch (level) {
    case Level::kRaw:
      return "raw";
    case Level::kL0:
      return "L0";
    case Level::kL1:
      return "L1";
    case Level::kL2:
      return "L2";
    case Level::kAuto:
      return "auto";
  }
  return "?";
}

absl::StatusOr<Level> ParseLevel(std::string_view name) {
  for (Level level :
       {Level::kRaw, Level::kL0, Level::kL1, Level::kL2, Level::kAuto}) {
    if (name == LevelName(level)) return level;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown level '", std::string(name),
                   "' (expected raw, L0, L1, L2 or auto)"));
}

int LevelRank(Level level) {
  switch (level) {
    case Level::kRaw:
      return 0;
    case Level::kL0:
      return 1;
    case Level::kL1:
      return 2;
    case Level::kL2:
      return 3;
    case Level::kAuto:
      return -1;
  }
  return -1;
}

}  // namespace mesa_anyjev::decision
