// bench compare's runner (docs/learning.md, bench compare): the labelled
// states of a task decided by two providers with the same question at each
// level both serve (raw and L0 after a prior reset; L1 with each model's
// own promoted temperature), compared item by item (common/eval
// agreement.h), with a verdict per cell and per question.
#pragma once

#include <string>
#include <vector>

#include "client/backends/provider.h"
#include "client/bench/task.h"
#include "client/ui/progress.h"
#include "common/decision/level.h"
#include "common/eval/agreement.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::bench {

struct CompareOptions {
  std::vector<decision::Level> levels = {
      decision::Level::kRaw, decision::Level::kL0, decision::Level::kL1};
  eval::BootstrapOptions bootstrap;
  eval::Tolerances tolerances;
};

// What the p_a against p_b picture needs of one compared cell.
struct ComparePoints {
  std::string task;
  std::string level;
  bool noul = false;
  eval::ProbRows a;
  eval::ProbRows b;
};

// The digest of the labels a task was built from: sha256 over the
// question's key and each item's (state sha256, label), in the task's
// order. New labels (or a new min_weight) give a new digest.
std::string LabelsSha256(const Task& task);

// {task, question_id, question_key, n_items, labels_sha256, verdict, cells
// {level: cell}}. A compared cell: {n, flips, flip_rate, flip_interval [lo,
// hi], mean_abs_dp, p95_abs_dp, a {acc, nll, ece}, b {...}, difference
// {acc|nll|ece: {value, lo, hi}} (a - b), resamples, seed, verdict}; a level
// one side cannot serve is {not_applicable, reason} naming the side; any
// other failure {error}. The question's verdict: "agree" when every
// compared cell agrees, "disagree" when one does not, "n/a" when none was
// compared. Compared cells are appended to `points`.
nlohmann::ordered_json CompareTask(client::Provider& a, client::Provider& b,
                                   const Task& task,
                                   const CompareOptions& options,
                                   std::vector<ComparePoints>* points,
                                   client::ui::Progress* bar);

}  // namespace mesa_anyjev::bench
