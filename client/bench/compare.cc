// bench compare's runner (see compare.h).
#include "client/bench/compare.h"

#include "absl/strings/str_cat.h"
#include "client/learn/cell.h"
#include "client/learn/loco.h"
#include "common/decision/py_json.h"
#include "common/util/hash.h"

namespace mesa_anyjev::bench {
namespace {

using Json = nlohmann::ordered_json;
using decision::Level;

Json NotApplicable(const std::string& reason) {
  return Json{{"not_applicable", true}, {"reason", reason}};
}

Json ErrorCell(const std::string& side, const absl::Status& status) {
  return Json{{"error", absl::StrCat("model ", side, ": ",
                                     absl::StatusCodeToString(status.code()),
                                     ": ", status.message())}};
}

// One side's decisions at `level`, or the cell that says why there are
// none: FAILED_PRECONDITION is a level that side does not serve.
absl::StatusOr<std::vector<decision::Decision>> DecideSide(
    client::Provider& provider, const std::string& side,
    const std::vector<std::string>& states, const Task& task, Level level,
    Json* why) {
  if (level != Level::kL1) {
    if (absl::Status reset = provider.ResetRunningPriors(); !reset.ok()) {
      *why = ErrorCell(side, reset);
      return reset;
    }
  }
  auto decided = provider.DecideBatch(states, task.question, level);
  if (!decided.ok()) {
    *why = absl::IsFailedPrecondition(decided.status())
               ? NotApplicable(absl::StrCat(
                     "model ", side, " (", provider.info().model,
                     ") does not serve ", decision::LevelName(level), ": ",
                     decided.status().message()))
               : ErrorCell(side, decided.status());
    return decided;
  }
  for (const decision::Decision& d : *decided) {
    // An L1 read without its frozen prior is L0 (docs/reference.md, Fits
    // freeze their prior): not this level's comparison.
    const bool frozen = d.diagnostics.prior_method.starts_with("frozen:");
    if (d.level != level || (level == Level::kL1 && !frozen)) {
      *why = NotApplicable(absl::StrCat(
          "model ", side, " (", provider.info().model, ") served ",
          task.question_id, " at ", decision::LevelName(d.level),
          level == Level::kL1 && !frozen ? " without its frozen prior" : "",
          ", not ", decision::LevelName(level)));
      return absl::FailedPreconditionError("served below the level");
    }
  }
  return decided;
}

Json Figures(const eval::ModelFigures& f) {
  return Json{{"acc", f.acc}, {"nll", f.nll}, {"ece", f.ece}};
}

Json Difference(const eval::PairedDifference& d) {
  return Json{{"value", d.value}, {"lo", d.interval.lo}, {"hi", d.interval.hi}};
}

Json AgreementCell(const eval::Agreement& got, bool agrees) {
  Json cell;
  cell["n"] = got.n;
  cell["flips"] = got.flips;
  cell["flip_rate"] = got.flip_rate;
  cell["flip_interval"] =
      Json::array({got.flip_interval.lo, got.flip_interval.hi});
  cell["mean_abs_dp"] = got.mean_abs_dp;
  cell["p95_abs_dp"] = got.p95_abs_dp;
  cell["a"] = Figures(got.a);
  cell["b"] = Figures(got.b);
  cell["difference"] = Json{{"acc", Difference(got.acc)},
                            {"nll", Difference(got.nll)},
                            {"ece", Difference(got.ece)}};
  cell["resamples"] = got.bootstrap.resamples;
  cell["seed"] = got.bootstrap.seed;
  cell["verdict"] = agrees ? "agree" : "disagree";
  return cell;
}

}  // namespace

std::string LabelsSha256(const Task& task) {
  Json items = Json::array();
  for (size_t i = 0; i < task.items.size(); ++i) {
    items.push_back(Json::array(
        {util::Sha256Hex(decision::PyJsonCanonical(task.items.states[i])),
         task.items.labels[i]}));
  }
  return util::Sha256Hex(decision::PyJsonCanonical(
      Json{{"question_key", task.question.key()}, {"items", items}}));
}

Json CompareTask(client::Provider& a, client::Provider& b, const Task& task,
                 const CompareOptions& options,
                 std::vector<ComparePoints>* points,
                 client::ui::Progress* bar) {
  const std::vector<std::string> states =
      learn::RenderStates(task.items.states);
  Json cells = Json::object();
  bool compared = false;
  bool all_agree = true;
  bool errored = false;  // a cell that failed leaves the question undecided
  for (const Level level : options.levels) {
    const std::string name = decision::LevelName(level);
    if (bar != nullptr) bar->Show(absl::StrCat(task.name, " ", name));
    Json cell;
    auto da = DecideSide(a, "a", states, task, level, &cell);
    auto db =
        da.ok() ? DecideSide(b, "b", states, task, level, &cell)
                : absl::StatusOr<std::vector<decision::Decision>>(da.status());
    if (da.ok() && db.ok()) {
      const eval::ProbRows pa = learn::ProbsOf(*da);
      const eval::ProbRows pb = learn::ProbsOf(*db);
      auto got =
          eval::CompareModels(pa, pb, task.items.labels, options.bootstrap);
      if (!got.ok()) {
        cell = Json{{"error", std::string(got.status().message())}};
      } else {
        const bool agrees = eval::Agrees(*got, options.tolerances);
        cell = AgreementCell(*got, agrees);
        compared = true;
        all_agree = all_agree && agrees;
        points->push_back({task.name, name, task.noul(), pa, pb});
      }
    }
    errored = errored || cell.contains("error");
    cells[name] = std::move(cell);
    if (bar != nullptr) bar->Set(bar->done() + 1, "");
  }
  Json result;
  result["task"] = task.name;
  result["question_id"] = task.question_id;
  result["question_key"] = task.question.key();
  result["n_items"] = task.items.size();
  result["labels_sha256"] = LabelsSha256(task);
  result["verdict"] = !compared || errored ? "n/a"
                      : all_agree          ? "agree"
                                           : "disagree";
  result["cells"] = std::move(cells);
  return result;
}

}  // namespace mesa_anyjev::bench
