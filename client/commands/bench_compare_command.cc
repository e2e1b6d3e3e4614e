// `mesa-anyjev bench compare` (docs/learning.md, bench compare): the label
// store's tasks decided through two backends, compared per question and
// level, written as JSON, Markdown and one SVG per compared cell, and the
// verdict kept as an agreement record beside both models' bundles
// (docs/bundles.md, Agreement). Exit codes: 0 every compared question
// agrees, 1 one does not (or a side failed), 2 usage or configuration.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backends/provider.h"
#include "client/bench/compare.h"
#include "client/bench/results.h"
#include "client/bench/svg_plots.h"
#include "client/bench/task.h"
#include "client/commands/agreement_access.h"
#include "client/commands/batch_class.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/run_retries.h"
#include "client/learn/label_store.h"
#include "client/policy/policy.h"
#include "client/ui/progress.h"
#include "client/ui/table.h"
#include "client/ui/terminal.h"
#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/decision/py_json.h"
#include "common/questions/question_set.h"
#include "common/status/status_macros.h"
#include "common/util/files.h"
#include "common/util/hash.h"

namespace mesa_anyjev::client {
namespace {

using Json = nlohmann::ordered_json;
using decision::Level;

int Fail(const std::string& message, int code) {
  std::cerr << "mesa-anyjev bench compare: " << message << "\n";
  return code;
}

// --levels: raw, L0 and L1 only. L2 reads each model's own hidden states
// through its own head; there is no shared readout to compare.
absl::StatusOr<std::vector<Level>> ParseLevels(const std::string& text) {
  std::vector<Level> levels;
  for (const std::string& name :
       std::vector<std::string>(absl::StrSplit(text, ',', absl::SkipEmpty()))) {
    auto level = decision::ParseLevel(name);
    if (!level.ok() || (*level != Level::kRaw && *level != Level::kL0 &&
                        *level != Level::kL1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--levels: '", name, "' is not one of raw, L0, L1 (L2 reads each ",
          "model's own head; it is not compared)"));
    }
    levels.push_back(*level);
  }
  if (levels.empty()) {
    return absl::InvalidArgumentError(
        "--levels: name at least one of raw, "
        "L0, L1");
  }
  return levels;
}

// One side's configuration: the command's, with its --a-set / --b-set.
absl::StatusOr<config::Config> SideConfig(const config::Config& base,
                                          const std::vector<std::string>& sets,
                                          const char* flag) {
  std::vector<config::Override> flags;
  for (const std::string& set : sets) {
    auto parsed = config::ParseSetFlag(set);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", parsed.status().message()));
    }
    parsed->origin = absl::StrCat("flag ", flag, " ", set);
    flags.push_back(*std::move(parsed));
  }
  return config::WithOverrides(base, flags);
}

struct Side {
  std::string name;  // "a" or "b"
  std::string kind;
  config::Config config;
  std::unique_ptr<Provider> provider;
};

absl::StatusOr<Side> OpenSide(const config::Config& base,
                              const std::string& name, const std::string& kind,
                              const std::vector<std::string>& sets,
                              const RunRetries& retries) {
  Side side{name, kind, {}, nullptr};
  auto config = SideConfig(base, sets, name == "a" ? "--a-set" : "--b-set");
  if (!config.ok()) return config.status();
  side.config = *std::move(config);
  auto provider = MakeProvider(side.config, kind, retries.rule());
  if (!provider.ok()) {
    return absl::Status(provider.status().code(),
                        absl::StrCat("model ", name, " (--", name, " ", kind,
                                     "): ", provider.status().message()));
  }
  side.provider = *std::move(provider);
  // L1 is served with each model's own promoted temperature.
  LoadPromotedBundle(side.config, kind, side.provider.get());
  return side;
}

std::string Fixed(double value, int digits = 3) {
  return absl::StrFormat("%.*f", digits, value);
}

std::string Range(const Json& lo, const Json& hi) {
  return absl::StrCat("[", Fixed(lo.get<double>()), ", ",
                      Fixed(hi.get<double>()), "]");
}

// The rows people read: one per question and level.
void PrintTable(const Json& payload, std::ostream& out) {
  const Json& models = payload["models"];
  out << "a = " << models[0]["model"].get<std::string>() << " ("
      << models[0]["backend_kind"].get<std::string>()
      << "), b = " << models[1]["model"].get<std::string>() << " ("
      << models[1]["backend_kind"].get<std::string>() << "); "
      << payload["bootstrap"]["resamples"] << " bootstrap resamples, seed "
      << payload["bootstrap"]["seed"] << "; agree when the flip rate's 95% "
      << "upper bound <= " << payload["tolerances"]["max_flip"]
      << " and the accuracy difference's 95% interval is within +-"
      << payload["tolerances"]["max_acc_diff"] << "\n";
  ui::Table table({{"question"},
                   {"level"},
                   {"n", ui::Align::kRight},
                   {"flip [95%]"},
                   {"|dp| mean/p95"},
                   {"acc a/b"},
                   {"d acc [95%]"},
                   {"d nll [95%]"},
                   {"d ece [95%]"},
                   {"verdict", ui::Align::kLeft, true}});
  for (const auto& [name, task] : payload["tasks"].items()) {
    for (const auto& [level, cell] : task["cells"].items()) {
      const std::string id = task["question_id"].get<std::string>();
      if (!cell.contains("verdict")) {
        table.AddRow({id, level, "", "", "", "", "", "", "",
                      cell.contains("error")
                          ? "error: " + cell["error"].get<std::string>()
                          : "n/a: " + cell["reason"].get<std::string>()});
        continue;
      }
      const Json& d = cell["difference"];
      table.AddRow({id, level, absl::StrCat(cell["n"].get<int64_t>()),
                    absl::StrCat(Fixed(cell["flip_rate"].get<double>()), " ",
                                 Range(cell["flip_interval"][0],
                                       cell["flip_interval"][1])),
                    absl::StrCat(Fixed(cell["mean_abs_dp"].get<double>()), "/",
                                 Fixed(cell["p95_abs_dp"].get<double>())),
                    absl::StrCat(Fixed(cell["a"]["acc"].get<double>()), "/",
                                 Fixed(cell["b"]["acc"].get<double>())),
                    absl::StrCat(Fixed(d["acc"]["value"].get<double>()), " ",
                                 Range(d["acc"]["lo"], d["acc"]["hi"])),
                    absl::StrCat(Fixed(d["nll"]["value"].get<double>()), " ",
                                 Range(d["nll"]["lo"], d["nll"]["hi"])),
                    absl::StrCat(Fixed(d["ece"]["value"].get<double>()), " ",
                                 Range(d["ece"]["lo"], d["ece"]["hi"])),
                    cell["verdict"].get<std::string>()});
    }
  }
  table.Print(out, ui::OutputColumns());
  for (const auto& [name, task] : payload["tasks"].items()) {
    out << task["question_id"].get<std::string>() << ": "
        << task["verdict"].get<std::string>() << "\n";
  }
}

// The Markdown file beside the JSON: the same rows, untruncated.
std::string Markdown(const Json& payload) {
  std::string md = absl::StrCat(
      "# bench compare ", payload["date"].get<std::string>(), " · a ",
      payload["models"][0]["model"].get<std::string>(), " (",
      payload["models"][0]["backend_kind"].get<std::string>(), ") · b ",
      payload["models"][1]["model"].get<std::string>(), " (",
      payload["models"][1]["backend_kind"].get<std::string>(), ")\n\n",
      "| question | level | n | flip | flip 95% | mean abs dp | p95 abs dp | "
      "acc a | acc b | d acc | d acc 95% | d nll 95% | d ece 95% | verdict "
      "|\n",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [name, task] : payload["tasks"].items()) {
    for (const auto& [level, cell] : task["cells"].items()) {
      const std::string id = task["question_id"].get<std::string>();
      if (!cell.contains("verdict")) {
        absl::StrAppend(&md, "| ", id, " | ", level,
                        " | | | | | | | | | | | | n/a |\n");
        continue;
      }
      const Json& d = cell["difference"];
      absl::StrAppend(&md, "| ", id, " | ", level, " | ",
                      cell["n"].get<int64_t>(), " | ",
                      Fixed(cell["flip_rate"].get<double>()), " | ",
                      Range(cell["flip_interval"][0], cell["flip_interval"][1]),
                      " | ", Fixed(cell["mean_abs_dp"].get<double>()), " | ",
                      Fixed(cell["p95_abs_dp"].get<double>()), " | ",
                      Fixed(cell["a"]["acc"].get<double>()), " | ",
                      Fixed(cell["b"]["acc"].get<double>()), " | ",
                      Fixed(d["acc"]["value"].get<double>()), " | ",
                      Range(d["acc"]["lo"], d["acc"]["hi"]), " | ",
                      Range(d["nll"]["lo"], d["nll"]["hi"]), " | ",
                      Range(d["ece"]["lo"], d["ece"]["hi"]), " | ",
                      cell["verdict"].get<std::string>(), " |\n");
    }
  }
  absl::StrAppend(&md,
                  "\nResamples: ", payload["bootstrap"]["resamples"].dump(),
                  ", seed ", payload["bootstrap"]["seed"].dump(), ".\n");
  return md;
}

// <out>/<date>/compare.<slug a>.<kind a>.vs.<slug b>.<kind b>.{json,md} and
// a picture per compared cell; returns the JSON's path.
absl::StatusOr<std::string> WriteFiles(
    const Json& payload, const std::vector<bench::ComparePoints>& points,
    const std::string& out, const std::string& date, const Side& a,
    const Side& b) {
  const std::filesystem::path dir = std::filesystem::path(out) / date;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat(
        "--out: cannot create ", dir.string(), ": ", error.message()));
  }
  const ProviderInfo& ia = a.provider->info();
  const ProviderInfo& ib = b.provider->info();
  const std::string base =
      (dir / absl::StrCat("compare.", bench::ModelSlug(ia.model), ".", ia.kind,
                          ".vs.", bench::ModelSlug(ib.model), ".", ib.kind))
          .string();
  const nlohmann::json sorted = payload;
  RETURN_IF_ERROR(util::WriteFileAtomic(base + ".json", sorted.dump(1) + "\n"));
  RETURN_IF_ERROR(util::WriteFileAtomic(base + ".md", Markdown(payload)));
  for (const bench::ComparePoints& p : points) {
    RETURN_IF_ERROR(util::WriteFileAtomic(
        absl::StrCat(base, ".", p.task, ".", p.level, ".agreement.svg"),
        bench::AgreementSvg(
            p.a, p.b, p.noul,
            absl::StrCat(p.task, " ", p.level, ": p_a vs p_b"),
            absl::StrCat("p_a (", ia.model, ", ", ia.kind, ")"),
            absl::StrCat("p_b (", ib.model, ", ", ib.kind, ")"))));
  }
  return base + ".json";
}

// The record both models keep: identities, lock, labels, figures, verdict.
Json Record(const Json& payload, const std::string& results_path) {
  Json labels = Json::object();
  Json questions = Json::object();
  for (const auto& [name, task] : payload["tasks"].items()) {
    const std::string id = task["question_id"].get<std::string>();
    labels[id] = task["labels_sha256"];
    questions[id] = Json{{"key", task["question_key"]},
                         {"labels_sha256", task["labels_sha256"]},
                         {"n", task["n_items"]},
                         {"verdict", task["verdict"]},
                         {"levels", task["cells"]}};
  }
  return Json{
      {"record", bundles::kAgreementRecord},
      {"date", payload["timestamp"]},
      {"questions_lock_sha", payload["questions_lock_sha"]},
      {"labels_sha256", util::Sha256Hex(decision::PyJsonCanonical(labels))},
      {"models", payload["models"]},
      {"tolerances", payload["tolerances"]},
      {"bootstrap", payload["bootstrap"]},
      {"results", results_path},
      {"questions", std::move(questions)}};
}

}  // namespace

int RunBenchCompare(const config::Config& given,
                    const BenchCompareOptions& options) {
  // Dataset work: both sides ask the batch class (client.priority).
  const config::Config config = AsBatchRun(given);
  auto levels = ParseLevels(options.levels);
  if (!levels.ok()) return Fail(std::string(levels.status().message()), 2);
  const absl::Time now = absl::Now();
  const std::string date =
      options.date.empty()
          ? absl::FormatTime("%Y-%m-%d", now, absl::UTCTimeZone())
          : options.date;
  absl::Time parsed;
  std::string parse_error;
  if (date.size() != 10 ||
      !absl::ParseTime("%Y-%m-%d", date, absl::UTCTimeZone(), &parsed,
                       &parse_error)) {
    return Fail(absl::StrCat("--date: '", date, "' is not YYYY-MM-DD"), 2);
  }

  auto store = learn::LabelStore::Open(config.labels.dir);
  if (!store.ok()) return Fail(std::string(store.status().message()), 1);
  std::vector<bench::Task> tasks = bench::TasksFromStore(
      *store, questions::QuestionSet::Reference(), policy::Policy::Defaults());
  if (!options.tasks.empty()) {
    std::vector<std::string> wanted =
        absl::StrSplit(options.tasks, ',', absl::SkipEmpty());
    std::vector<bench::Task> chosen;
    for (const std::string& name : wanted) {
      bool found = false;
      for (const bench::Task& task : tasks) {
        if (task.name == name) {
          chosen.push_back(task);
          found = true;
        }
      }
      if (!found) {
        return Fail(absl::StrCat("unknown or empty task '", name,
                                 "' (see `mesa-anyjev bench run`)"),
                    1);
      }
    }
    tasks = std::move(chosen);
  }
  if (tasks.empty()) {
    return Fail(absl::StrCat("the label store ", store->path(),
                             " has no labels; see `mesa-anyjev learn ingest`"),
                1);
  }

  const RunRetries retries("bench compare");
  auto a = OpenSide(config, "a", options.a_kind, options.a_sets, retries);
  if (!a.ok()) {
    return Fail(std::string(a.status().message()),
                absl::IsInvalidArgument(a.status()) ? 2 : 1);
  }
  auto b = OpenSide(config, "b", options.b_kind, options.b_sets, retries);
  if (!b.ok()) {
    return Fail(std::string(b.status().message()),
                absl::IsInvalidArgument(b.status()) ? 2 : 1);
  }

  bench::CompareOptions compare;
  compare.levels = *levels;
  compare.bootstrap.resamples = config.compare.resamples;
  compare.bootstrap.seed = static_cast<uint32_t>(config.compare.seed);
  compare.tolerances.max_flip = config.compare.max_flip;
  compare.tolerances.max_acc_diff = config.compare.max_acc_diff;

  ui::Progress bar("cells", static_cast<int>(tasks.size() * levels->size()),
                   ui::StderrIsTty(), std::cerr);
  std::vector<bench::ComparePoints> points;
  Json results = Json::object();
  for (const bench::Task& task : tasks) {
    bar.Finish();
    std::cerr << "== " << task.name << ": " << task.items.size() << " items\n";
    results[task.name] = bench::CompareTask(*a->provider, *b->provider, task,
                                            compare, &points, &bar);
  }
  bar.Finish();

  Json payload;
  payload["date"] = date;
  payload["timestamp"] =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  payload["questions_lock_sha"] = BundleLockSha();
  payload["models"] =
      Json::array({RecordedModelJson(RecordedModelOf(a->provider->info())),
                   RecordedModelJson(RecordedModelOf(b->provider->info()))});
  payload["tolerances"] =
      Json{{"max_flip", compare.tolerances.max_flip},
           {"max_acc_diff", compare.tolerances.max_acc_diff}};
  payload["bootstrap"] = Json{{"resamples", compare.bootstrap.resamples},
                              {"seed", compare.bootstrap.seed}};
  payload["tasks"] = std::move(results);

  auto path = WriteFiles(payload, points, options.out, date, *a, *b);
  if (!path.ok()) return Fail(std::string(path.status().message()), 1);
  payload["path"] = *path;
  payload["records"] = Json::array();
  bool kept = true;
  if (!options.no_record) {
    const Json record = Record(payload, *path);
    for (const Side* side : {&*a, &*b}) {
      const bundles::RecordedModel self =
          RecordedModelOf(side->provider->info());
      auto where =
          KeepAgreement(side->config, side->kind, self.binding(), record);
      if (where.ok()) {
        payload["records"].push_back(*where);
      } else {
        kept = false;
        std::cerr << "mesa-anyjev bench compare: the agreement record was not "
                     "kept beside model "
                  << side->name << "'s bundles: " << where.status().message()
                  << "\n";
      }
    }
  }

  bool all_agree = true;
  for (const auto& [name, task] : payload["tasks"].items()) {
    all_agree = all_agree && task["verdict"] == "agree";
  }
  if (options.json) {
    ui::PrintJson(payload, std::cout);
  } else {
    std::cout << *path << "\n";
    PrintTable(payload, std::cout);
    for (const auto& where : payload["records"]) {
      std::cout << "agreement record: " << where.get<std::string>() << "\n";
    }
  }
  return all_agree && kept ? 0 : 1;
}

}  // namespace mesa_anyjev::client
