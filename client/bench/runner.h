// The bench runner (docs/learning.md): per task and level a cell of
// the metrics of common/eval. raw and L0 decide every item once after a
// prior reset (a choice re-asked with its options reversed for flip); L1
// and L2 run leave-one-card-out through the same path as learn fit, so a
// bench cell and a fit report of the same labels agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "client/bench/task.h"
#include "client/ui/progress.h"
#include "common/decision/level.h"
#include "common/eval/metrics.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::bench {

using client::Provider;

struct RunOptions {
  std::vector<decision::Level> levels = {
      decision::Level::kRaw, decision::Level::kL0, decision::Level::kL1};
  bool loco = true;
  bool flip = true;
};

// What a plot needs of an applicable cell.
struct CellCurves {
  std::string task;
  std::string level;
  eval::ProbRows probs;
  std::vector<int> labels;
};

// How far a cell moves the progress bar: one step for raw and L0, one per
// leave-one-card-out fold (a card) for L1 and L2.
int ProgressSteps(const Task& task, decision::Level level,
                  const RunOptions& options);

// {task, question_id, n_items, class_counts, license, source, notes, loco,
// cells {level: cell}}; a cell is the metrics or {not_applicable, reason}
// or {error}. Applicable cells are appended to `curves`.
nlohmann::ordered_json RunTask(Provider& provider, const Task& task,
                               const RunOptions& options,
                               std::vector<CellCurves>* curves,
                               client::ui::Progress* bar);

}  // namespace mesa_anyjev::bench
