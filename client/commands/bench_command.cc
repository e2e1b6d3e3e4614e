// `mesa-anyjev bench run|table` (docs/learning.md). Exit codes:
// 0 written / printed, 1 unknown or empty tasks or a failure, 2 usage or a
// missing input.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backends/provider.h"
#include "client/bench/results.h"
#include "client/bench/runner.h"
#include "client/bench/svg_plots.h"
#include "client/bench/task.h"
#include "client/commands/batch_class.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/missing_labels.h"
#include "client/commands/run_retries.h"
#include "client/learn/label_store.h"
#include "client/policy/policy.h"
#include "client/ui/progress.h"
#include "client/ui/terminal.h"
#include "common/decision/py_format.h"
#include "common/questions/question_set.h"
#include "common/text/strict_json.h"
#include "common/util/files.h"

namespace mesa_anyjev::client {
namespace {

using Json = nlohmann::ordered_json;

int Fail(absl::string_view verb, absl::string_view message, int code) {
  std::cerr << "mesa-anyjev bench " << verb << ": " << message << "\n";
  return code;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

// Python's repr of a list of strings: ['a', 'b'].
std::string PyList(const std::vector<std::string>& items) {
  return absl::StrCat("[",
                      absl::StrJoin(items, ", ",
                                    [](std::string* out, const std::string& s) {
                                      absl::StrAppend(out, "'", s, "'");
                                    }),
                      "]");
}

bool IsDate(const std::string& date) {
  absl::Time t;
  std::string err;
  return date.size() == 10 &&
         absl::ParseTime("%Y-%m-%d", date, absl::UTCTimeZone(), &t, &err);
}

absl::Status WritePlots(const std::vector<bench::CellCurves>& curves,
                        const std::string& base) {
  for (const auto& c : curves) {
    const std::string stem = absl::StrCat(base, ".", c.task, ".", c.level);
    const std::string title = absl::StrCat(c.task, " ", c.level);
    auto bins = eval::ReliabilityBins(c.probs, c.labels);
    auto curve = eval::RiskCoverage(c.probs, c.labels);
    if (!bins.ok()) return bins.status();
    if (!curve.ok()) return curve.status();
    if (absl::Status s = util::WriteFileAtomic(
            stem + ".reliability.svg",
            bench::ReliabilitySvg(*bins, title + ": reliability"));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = util::WriteFileAtomic(
            stem + ".risk_coverage.svg",
            bench::RiskCoverageSvg(*curve, title + ": risk-coverage"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// --levels and --date, checked before anything is opened (usage errors).
absl::StatusOr<bench::RunOptions> RunOptionsFrom(const BenchOptions& options) {
  bench::RunOptions run;
  run.levels.clear();
  for (const std::string& name : SplitList(options.levels)) {
    auto level = decision::ParseLevel(name);
    if (!level.ok() || *level == decision::Level::kAuto) {
      return absl::InvalidArgumentError(
          absl::StrCat("--levels: '", name, "' is not one of raw, L0, L1, L2"));
    }
    run.levels.push_back(*level);
  }
  if (run.levels.empty()) {
    return absl::InvalidArgumentError(
        "--levels: name at least one of raw, L0, L1, L2");
  }
  run.loco = !options.no_loco;
  run.flip = !options.no_flip;
  return run;
}

// --date, or today in UTC.
absl::StatusOr<std::string> RunDate(const std::string& given) {
  const std::string date =
      given.empty()
          ? absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone())
          : given;
  if (!IsDate(date)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--date: '", date, "' is not YYYY-MM-DD"));
  }
  return date;
}

// The tasks --tasks names (all of them when empty), in the order named. The
// error's message is the whole line (it has no "bench run:" prefix).
absl::StatusOr<std::vector<const bench::Task*>> ChooseTasks(
    const std::vector<bench::Task>& all, const std::string& names,
    const std::string& store_path) {
  std::vector<std::string> available;
  for (const auto& task : all) available.push_back(task.name);
  std::sort(available.begin(), available.end());
  std::vector<const bench::Task*> chosen;
  if (names.empty()) {
    for (const auto& task : all) chosen.push_back(&task);
  } else {
    std::vector<std::string> unknown;
    for (const std::string& name : SplitList(names)) {
      auto it = std::find_if(all.begin(), all.end(), [&](const bench::Task& t) {
        return t.name == name;
      });
      if (it == all.end()) {
        unknown.push_back(name);
      } else {
        chosen.push_back(&*it);
      }
    }
    if (!unknown.empty()) {
      return absl::NotFoundError(
          absl::StrCat("unknown or empty tasks: ", PyList(unknown),
                       "; available: ", PyList(available)));
    }
  }
  if (chosen.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "unknown or empty tasks: []; available: ", PyList(available),
        " (the label store ", store_path,
        " has no labels; see `mesa-anyjev learn ingest`)"));
  }
  return chosen;
}

// Every (task, level) cell, under one progress bar; {task name: results}.
Json RunTasks(Provider& provider, const std::vector<const bench::Task*>& tasks,
              const bench::RunOptions& run,
              std::vector<bench::CellCurves>* curves) {
  int steps = 0;
  for (const bench::Task* task : tasks) {
    for (const decision::Level level : run.levels) {
      steps += bench::ProgressSteps(*task, level, run);
    }
  }
  ui::Progress bar("steps", steps, ui::StderrIsTty(), std::cerr);
  Json results = Json::object();
  for (const bench::Task* task : tasks) {
    bar.Finish();
    std::cerr << "== " << task->name << ": " << task->items.size()
              << " items\n";
    results[task->name] = bench::RunTask(provider, *task, run, curves, &bar);
  }
  bar.Finish();
  return results;
}

Json Payload(const std::string& date, const Provider& provider,
             const Json& tasks) {
  Json payload;
  payload["date"] = date;
  payload["missing_labels"] = provider.missing_label_events();
  payload["backend"] = provider.info().kind;
  payload["environment"] = bench::Environment(provider.info());
  payload["tasks"] = tasks;
  payload["policy_suggestions"] = bench::PolicySuggestions(tasks);
  return payload;
}

// The results JSON under <out>/<date>/, then each cell's plots beside it;
// returns the JSON's path.
absl::StatusOr<std::string> WriteRun(
    const Json& payload, const std::vector<bench::CellCurves>& curves,
    const std::string& out, const ProviderInfo& info, const std::string& date) {
  const std::string slug = bench::ModelSlug(info.model);
  auto path = bench::WriteResults(payload, out, slug, info.kind, date);
  if (!path.ok()) return path.status();
  const std::string base =
      (std::filesystem::path(out) / date / absl::StrCat(slug, ".", info.kind))
          .string();
  if (absl::Status s = WritePlots(curves, base); !s.ok()) return s;
  return path;
}

}  // namespace

int RunBenchRun(const config::Config& given, const BenchOptions& options) {
  const config::Config config = AsBatchRun(given);
  auto run = RunOptionsFrom(options);
  if (!run.ok()) return Fail("run", run.status().message(), 2);
  auto date = RunDate(options.date);
  if (!date.ok()) return Fail("run", date.status().message(), 2);

  auto store = learn::LabelStore::Open(config.labels.dir);
  if (!store.ok()) return Fail("run", store.status().message(), 1);
  const std::vector<bench::Task> all = bench::TasksFromStore(
      *store, questions::QuestionSet::Reference(), policy::Policy::Defaults());
  auto chosen = ChooseTasks(all, options.tasks, store->path());
  if (!chosen.ok()) {
    std::cerr << chosen.status().message() << "\n";
    return 1;
  }

  const RunRetries retries("bench run");
  auto provider = MakeProvider(config, options.backend, retries.rule());
  if (!provider.ok()) {
    return Fail("run", provider.status().message(),
                absl::IsInvalidArgument(provider.status()) ? 2 : 1);
  }
  const ProviderInfo& info = (*provider)->info();
  LoadPromotedBundle(config, info.kind, provider->get());

  std::vector<bench::CellCurves> curves;
  const Json tasks = RunTasks(**provider, *chosen, *run, &curves);
  const Json payload = Payload(*date, **provider, tasks);
  auto path = WriteRun(payload, curves, options.out, info, *date);
  if (!path.ok()) return Fail("run", path.status().message(), 1);
  if (options.json) {
    ui::PrintJson(Json{{"path", *path}, {"rows", bench::TableRows(payload)}},
                  std::cout);
  } else {
    std::cout << *path << "\n" << bench::MarkdownTable(payload);
  }
  // Each cell's count is in the results; the run's total is said here.
  return ReportMissingLabels("bench run", (*provider)->missing_label_events(),
                             options.strict);
}

int RunBenchTable(const BenchOptions& options) {
  if (options.results.empty()) {
    return Fail("table", "needs --results FILE (a bench run's JSON)", 2);
  }
  auto text = util::ReadFile(options.results);
  if (!text.ok()) return Fail("table", text.status().message(), 2);
  const auto parsed = text::ParseStrictOrderedJson(*text, {});
  const Json payload = parsed.ok() ? *parsed : Json();
  if (!parsed.ok() || !payload.is_object()) {
    return Fail("table",
                absl::StrCat(options.results, ": not a bench results JSON"), 1);
  }
  try {
    if (options.json) {
      ui::PrintJson(bench::TableRows(payload), std::cout);
    } else {
      std::cout << bench::MarkdownTable(payload);
    }
  } catch (const nlohmann::json::exception& e) {
    return Fail(
        "table",
        absl::StrCat(options.results, ": not a bench results JSON: ", e.what()),
        1);
  }
  return 0;
}

}  // namespace mesa_anyjev::client
