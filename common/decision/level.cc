// Decision level names and ranks (see level.h).
#include "common/decision/level.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::decision {

namespace {

constexpr util::EnumName<Level> kLevelNames[] = {{Level::kRaw, "raw"},
                                                 {Level::kL0, "L0"},
                                                 {Level::kL1, "L1"},
                                                 {Level::kL2, "L2"},
                                                 {Level::kAuto, "auto"}};
static_assert(util::NamesEvery(kLevelNames, Level::kAuto));

}  // namespace

const char* LevelName(Level level) { return util::NameIn(kLevelNames, level); }

absl::StatusOr<Level> ParseLevel(std::string_view name) {
  if (auto level = util::ValueIn(kLevelNames, name)) return *level;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown level '", std::string(name), "' (expected ",
                   util::NamesIn(kLevelNames), ")"));
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
