// The bench runner (see runner.h).
#include "client/bench/runner.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/learn/cell.h"
#include "client/learn/loco.h"
#include "client/policy/policy.h"

namespace mesa_anyjev::bench {
namespace {

using Json = nlohmann::ordered_json;
using decision::Level;
namespace ui = client::ui;

Json NotApplicable(const std::string& reason) {
  Json cell;
  cell["not_applicable"] = true;
  cell["reason"] = reason;
  return cell;
}

Json ErrorCell(const absl::Status& status) {
  Json cell;
  cell["error"] = absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                               status.message());
  return cell;
}

// FAILED_PRECONDITION is the decider's LevelUnavailable: not applicable.
Json Unavailable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition
             ? NotApplicable(std::string(status.message()))
             : ErrorCell(status);
}

// raw / L0: every item decided once, the running prior reset first.
Json DirectCell(Provider& provider, const Task& task, Level level,
                const std::vector<std::string>& states, const RunOptions& opts,
                CellCurves* curves) {
  if (absl::Status s = provider.ResetRunningPriors(); !s.ok()) {
    return ErrorCell(s);
  }
  auto decided = provider.DecideBatch(states, task.question, level);
  if (!decided.ok()) return Unavailable(decided.status());
  eval::ProbRows flipped;
  const bool probe = opts.flip && !task.noul();
  if (probe) {
    std::vector<std::string> reversed = task.question.options();
    std::reverse(reversed.begin(), reversed.end());
    auto question = decision::Question::Choice(
        task.question.text(), reversed,
        absl::StrCat(task.question.id(), ".reversed"));
    if (!question.ok()) return ErrorCell(question.status());
    auto other = provider.DecideBatch(states, *question, level);
    if (!other.ok()) return Unavailable(other.status());
    // Back to the original option order: reverse the columns.
    for (const auto& d : *other) {
      flipped.emplace_back(d.probs.rbegin(), d.probs.rend());
    }
  }
  auto cell = learn::Cell(*decided, task.items.labels, task.noul(),
                          probe ? &flipped : nullptr);
  if (!cell.ok()) return ErrorCell(cell.status());
  curves->probs = learn::ProbsOf(*decided);
  curves->labels = task.items.labels;
  return *cell;
}

// L1 / L2: pooled leave-one-card-out.
Json LocoCell(Provider& provider, const Task& task, Level level,
              const RunOptions& opts, CellCurves* curves, ui::Progress* bar) {
  const std::string name = decision::LevelName(level);
  if (!opts.loco) return NotApplicable(absl::StrCat(name, " needs --loco"));
  const std::set<std::string> cards(task.items.cards.begin(),
                                    task.items.cards.end());
  if (cards.size() < 2) {
    return NotApplicable("leave-one-card-out needs at least two cards");
  }
  const int start = bar != nullptr ? bar->done() : 0;
  auto progress = [&](const std::string& card, int i, int n) {
    if (bar != nullptr) {
      bar->Set(start + i, absl::StrCat(task.name, " ", name, " fold ", i + 1,
                                       "/", n, " (", card, ")"));
    }
  };
  auto outcome = learn::LeaveOneCardOut(provider, task.question, task.items,
                                        level, progress);
  if (!outcome.ok()) return Unavailable(outcome.status());
  if (outcome->decisions.empty()) {
    Json cell = NotApplicable("every fold skipped");
    cell["skipped_folds"] = outcome->skipped_folds;
    return cell;
  }
  auto cell = learn::Cell(outcome->decisions, outcome->labels, task.noul());
  if (!cell.ok()) return ErrorCell(cell.status());
  (*cell)["folds"] = outcome->folds;
  (*cell)["skipped_folds"] = outcome->skipped_folds;
  (*cell)["n_folds"] = outcome->n_folds;
  curves->probs = learn::ProbsOf(outcome->decisions);
  curves->labels = outcome->labels;
  return *cell;
}

std::string LevelsText(const std::vector<Level>& levels) {
  return absl::StrJoin(levels, ", ", [](std::string* out, Level l) {
    absl::StrAppend(out, decision::LevelName(l));
  });
}

}  // namespace

int ProgressSteps(const Task& task, Level level, const RunOptions& options) {
  const bool loco = level == Level::kL1 || level == Level::kL2;
  if (!loco || !options.loco) return 1;
  const std::set<std::string> cards(task.items.cards.begin(),
                                    task.items.cards.end());
  return std::max<int>(1, static_cast<int>(cards.size()));
}

Json RunTask(Provider& provider, const Task& task, const RunOptions& options,
             std::vector<CellCurves>* curves, ui::Progress* bar) {
  const std::vector<std::string> states =
      learn::RenderStates(task.items.states);
  Json cells = Json::object();
  for (const Level level : options.levels) {
    const std::string name = decision::LevelName(level);
    // Where the bar stands when this cell is done, however it ends.
    const int cell_end = (bar != nullptr ? bar->done() : 0) +
                         ProgressSteps(task, level, options);
    if (bar != nullptr) bar->Show(absl::StrCat(task.name, " ", name));
    const bool supported =
        std::find(task.levels_supported.begin(), task.levels_supported.end(),
                  level) != task.levels_supported.end();
    if (!supported) {
      cells[name] = NotApplicable(absl::StrCat(
          "task supports (", LevelsText(task.levels_supported), ")"));
      if (bar != nullptr) bar->Set(cell_end, "");
      continue;
    }
    const int64_t prompts0 = provider.prompts();
    const int64_t missing0 = provider.missing_label_events();
    const auto t0 = std::chrono::steady_clock::now();
    CellCurves curve{task.name, name, {}, {}};
    const bool loco = level == Level::kL1 || level == Level::kL2;
    Json cell =
        loco ? LocoCell(provider, task, level, options, &curve, bar)
             : DirectCell(provider, task, level, states, options, &curve);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!cell.contains("not_applicable") && !cell.contains("error")) {
      cell["missing_labels"] = provider.missing_label_events() - missing0;
      cell["seconds"] = policy::PyRoundDigits(seconds, 2);
      cell["prompts"] = provider.prompts() - prompts0;
      // Not in the reference's cell: the table's cost column per decision.
      cell["prompts_per_decision"] = policy::PyRoundDigits(
          static_cast<double>(provider.prompts() - prompts0) /
              static_cast<double>(std::max<size_t>(1, task.items.size())),
          2);
      cell["ms_per_decision"] = policy::PyRoundDigits(
          1000.0 * seconds /
              static_cast<double>(std::max<size_t>(1, task.items.size())),
          1);
      cell["loco"] = loco;
      cell["masked"] = task.meta.value("masked", false);
      curves->push_back(std::move(curve));
    }
    cells[name] = std::move(cell);
    if (bar != nullptr) bar->Set(cell_end, absl::StrCat(task.name, " ", name));
  }
  Json result;
  result["task"] = task.name;
  result["question_id"] = task.question_id;
  result["n_items"] = task.items.size();
  result["class_counts"] =
      learn::CountsJson(learn::ClassCounts(task.items.labels));
  result["license"] = task.license;
  result["source"] = task.source;
  result["notes"] = task.notes;
  result["loco"] = options.loco;
  result["cells"] = std::move(cells);
  return result;
}

}  // namespace mesa_anyjev::bench
