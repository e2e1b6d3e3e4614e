// An explicit --level is served at that level or the command fails saying
// why and what to run. The decider's refusals name RPCs ("Fit at level
// L1"); these are the CLI's words for them.
#pragma once

#include <optional>
#include <string>

#include "client/policy/decision_record.h"
#include "common/decision/level.h"

namespace mesa_anyjev::client {

// The commands that make `level` servable for `question_id` on backend
// `kind`, each with the flags the user gave (`replay_flags`, shell-quoted).
std::string LevelRemedy(const std::string& question_id, decision::Level level,
                        const std::string& kind,
                        const std::string& replay_flags);

// Why a record asked for at `asked` (not auto) came back lower, or nullopt
// when it was served at `asked`.
std::optional<std::string> ServedBelow(const policy::DecisionRecord& record,
                                       decision::Level asked);

}  // namespace mesa_anyjev::client
