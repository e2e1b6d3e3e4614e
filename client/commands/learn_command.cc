// `mesa-anyjev learn ingest|fit` (docs/learning.md).
// Exit codes: 0 ingested / fitted, 1 refused (bad rows, a fit that is not
// "fitted", a backend failure), 2 usage or missing input.
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backends/daemon_client.h"
#include "client/backends/provider.h"
#include "client/commands/batch_class.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/run_retries.h"
#include "client/learn/fit.h"
#include "client/learn/label_ingest.h"
#include "client/learn/label_store.h"
#include "client/policy/policy.h"
#include "client/ui/progress.h"
#include "client/ui/table.h"
#include "client/ui/terminal.h"
#include "common/questions/question_set.h"
#include "common/status/status_macros.h"
#include "common/util/files.h"

namespace mesa_anyjev::client {
namespace {

using Json = nlohmann::ordered_json;

int Fail(const std::string& verb, const std::string& message, int code) {
  std::cerr << "mesa-anyjev learn " << verb << ": " << message << "\n";
  return code;
}

// A copy of the fit's files in --out (the bundle version is the record):
// artifacts.json (the heads/export file), manifest.json (model, lock sha and
// the fit's per_question and validation) and report.json (the full report).
absl::Status WriteFitFiles(const std::string& dir, const std::string& model,
                           learn::FitReport* report) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out: cannot create ", dir, ": ", ec.message()));
  }
  const std::filesystem::path root(dir);
  if (report->status == "fitted") {
    const std::string artifacts = (root / "artifacts.json").string();
    const nlohmann::json sorted_artifacts = report->artifacts;
    if (absl::Status s =
            util::WriteFileAtomic(artifacts, sorted_artifacts.dump(1) + "\n");
        !s.ok()) {
      return s;
    }
    Json manifest;
    manifest["model"] = model;
    manifest["version"] =
        report->version.has_value() ? Json(*report->version) : Json(nullptr);
    for (const auto& [key, value] : report->manifest_extra.items()) {
      manifest[key] = value;
    }
    const nlohmann::json sorted_manifest = manifest;
    if (absl::Status s = util::WriteFileAtomic(
            (root / "manifest.json").string(), sorted_manifest.dump(1) + "\n");
        !s.ok()) {
      return s;
    }
    if (report->artifact_path.empty()) report->artifact_path = artifacts;
  }
  Json full = learn::ReportJson(*report);
  full["folds"] = report->folds;  // unreduced
  return util::WriteFileAtomic((root / "report.json").string(),
                               full.dump(1) + "\n");
}

// Writes the fitted artifacts as the next bundle version: into the daemon's
// store for hf and composite, the local store otherwise.
absl::Status PutFitBundle(const config::Config& config, const std::string& kind,
                          learn::FitReport* report) {
  if (BundlesInDaemon(kind)) {
    ASSIGN_OR_RETURN(auto client, DaemonClient::Create(config.client));
    ASSIGN_OR_RETURN(const int version,
                     client->PutBundle(BundleLockSha(), report->artifacts,
                                       report->manifest_extra));
    report->version = version;
    report->artifact_path = absl::StrCat(config.client.address, ": v", version);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto store, OpenLocalBundleStore(config, kind));
  ASSIGN_OR_RETURN(const int version,
                   store->Put(report->artifacts, report->manifest_extra));
  report->version = version;
  report->artifact_path = (std::filesystem::path(store->dir()) /
                           absl::StrCat("v", version) / "artifacts.json")
                              .string();
  return absl::OkStatus();
}

absl::Status CheckBundleStoreWritable(const config::Config& config,
                                      const std::string& kind) {
  if (BundlesInDaemon(kind)) {
    ASSIGN_OR_RETURN(auto client, DaemonClient::Create(config.client));
    absl::StatusOr<RemoteBundles> listed = client->ListBundles(BundleLockSha());
    if (absl::IsFailedPrecondition(listed.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mesa-anyjevd at ", config.client.address, ": ",
          listed.status().message(),
          "; start it with a store (decisions.bundles_dir: auto, the "
          "default, or a path)"));
    }
    if (!listed.ok()) return listed.status();
    if (!listed->write_error.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("mesa-anyjevd at ", config.client.address, ": ",
                       listed->write_error));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto store, OpenLocalBundleStore(config, kind));
  return store->CheckWritable();
}

std::string Fixed3(const Json& value) {
  return value.is_number() ? absl::StrFormat("%.3f", value.get<double>()) : "-";
}

// learn fit for people: the outcome, the leave-one-card-out numbers per
// fold and pooled, where the version went, and the command to promote it.
void PrintFitSummary(const learn::FitReport& report,
                     const LearnOptions& options,
                     const std::vector<std::string>& answers) {
  std::vector<std::string> counts;
  for (const auto& [label, n] : report.class_counts) {
    const bool named =
        label >= 0 && static_cast<size_t>(label) < answers.size();
    counts.push_back(absl::StrCat(
        n, " ",
        named ? ui::FitCells(answers[static_cast<size_t>(label)], 16)
              : absl::StrCat(label)));
  }
  if (report.status != "fitted") {
    std::cout << report.question_id << " " << report.level << ": not fitted ("
              << report.status << "): " << report.detail << "\n";
    return;
  }
  std::cout << report.question_id << " " << report.level << ": fitted on "
            << report.n_labels << " labels (" << absl::StrJoin(counts, ", ")
            << ")\n";
  if (!report.folds.empty()) {
    ui::Table table({{"held-out card", ui::Align::kLeft, true},
                     {"n", ui::Align::kRight},
                     {"acc", ui::Align::kRight},
                     {"ECE", ui::Align::kRight},
                     {"cov@5%", ui::Align::kRight}});
    for (const auto& [card, cell] : report.folds.items()) {
      table.AddRow({card, absl::StrCat(cell.value("n", 0)),
                    Fixed3(cell.value("acc", Json())),
                    Fixed3(cell.value("ece", Json())),
                    Fixed3(cell.value("cov@5%", Json()))});
    }
    if (report.loco.is_object()) {
      table.AddRow({"pooled", absl::StrCat(report.loco.value("n", 0)),
                    Fixed3(report.loco.value("acc", Json())),
                    Fixed3(report.loco.value("ece", Json())),
                    Fixed3(report.loco.value("cov@5%", Json()))});
    }
    table.Print(std::cout, ui::OutputColumns());
  }
  for (const auto& [card, why] : report.skipped_folds.items()) {
    std::cout << "skipped fold " << card << ": "
              << (why.is_string() ? why.get<std::string>() : why.dump())
              << "\n";
  }
  if (!report.version.has_value()) return;
  std::cout << "stored as v" << *report.version << " (" << report.artifact_path
            << "); promote it to serve it:\n  mesa-anyjev learn promote "
            << "--version " << *report.version << " --question "
            << report.question_id << (options.replay_flags.empty() ? "" : " ")
            << options.replay_flags << "\n";
}

}  // namespace

int RunLearnIngest(const config::Config& config, const LearnOptions& options) {
  if (options.labels_file.empty()) {
    return Fail("ingest",
                "needs --labels FILE (JSON lines, one label row each; "
                "docs/learning.md)",
                2);
  }
  auto text = util::ReadFile(options.labels_file);
  if (!text.ok())
    return Fail("ingest", std::string(text.status().message()), 2);
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E6S+00:00",
                                          absl::Now(), absl::UTCTimeZone());
  learn::ParsedLabels parsed =
      learn::ParseLabelLines(*text, questions::QuestionSet::Reference(), ts);
  if (!parsed.problems.empty()) {
    for (const auto& problem : parsed.problems) {
      std::cerr << options.labels_file << ":" << problem.line << ": "
                << problem.reason << "\n";
    }
    return Fail(
        "ingest",
        absl::StrCat(parsed.problems.size(), " bad row(s); nothing stored"), 1);
  }
  auto store = learn::LabelStore::Open(config.labels.dir);
  if (!store.ok())
    return Fail("ingest", std::string(store.status().message()), 1);
  const std::vector<learn::LabelRow> rows = parsed.rows;
  auto inserted = store->Insert(std::move(parsed.rows));
  if (!inserted.ok()) {
    return Fail("ingest", std::string(inserted.status().message()), 1);
  }
  const Json summary = learn::IngestSummary(rows, *inserted);
  if (options.json) {
    ui::PrintJson(summary, std::cout);
    return 0;
  }
  std::cout << "stored " << *inserted << " new label(s) in " << store->path()
            << " (" << summary["skipped_existing"].get<int>()
            << " already there)\n";
  ui::Table table({{"question"}, {"labels", ui::Align::kRight}, {"sources"}});
  for (const auto& [qid, sources] : summary["per_question"].items()) {
    int n = 0;
    std::vector<std::string> parts;
    for (const auto& [source, count] : sources.items()) {
      n += count.get<int>();
      parts.push_back(absl::StrCat(source, " ", count.get<int>()));
    }
    table.AddRow({qid, absl::StrCat(n), absl::StrJoin(parts, ", ")});
  }
  table.Print(std::cout, ui::OutputColumns());
  // The README's question when it has labels, else the first that does.
  const Json& per = summary["per_question"];
  const std::string first = per.contains("term.fits") || per.empty()
                                ? "term.fits"
                                : per.begin().key();
  std::cout << "next: mesa-anyjev learn fit --question " << first
            << " --level L1   (or --level L2 on a backend with hidden "
               "states)\n";
  return 0;
}

int RunLearnFit(const config::Config& given, const LearnOptions& options) {
  const config::Config config = AsBatchRun(given);
  auto entry = questions::QuestionSet::Reference().Find(options.question_id);
  if (!entry.ok()) {
    return Fail("fit", absl::StrCat("--question: ", entry.status().message()),
                2);
  }
  auto level = decision::ParseLevel(options.level);
  if (!level.ok()) {
    return Fail("fit",
                absl::StrCat("--level: '", options.level, "' is not L1 or L2"),
                2);
  }
  auto thresholds = policy::Policy::Defaults().thresholds(options.question_id);
  if (!thresholds.ok()) {
    return Fail("fit", std::string(thresholds.status().message()), 1);
  }
  auto store = learn::LabelStore::Open(config.labels.dir);
  if (!store.ok()) return Fail("fit", std::string(store.status().message()), 1);
  const std::string kind =
      options.backend.empty() ? config.backend.kind : options.backend;
  // A fit that cannot be stored is refused before it runs, not discarded
  // after.
  if (absl::Status writable = CheckBundleStoreWritable(config, kind);
      !writable.ok()) {
    return Fail("fit", absl::StrCat(writable.message(), "; nothing was fitted"),
                1);
  }
  const RunRetries retries("learn fit");
  auto provider = MakeProvider(config, options.backend, retries.rule());
  if (!provider.ok()) {
    return Fail("fit", std::string(provider.status().message()),
                absl::IsInvalidArgument(provider.status()) ? 2 : 1);
  }
  // One step per leave-one-card-out fold and one for the final fit.
  ui::Progress bar("folds", 1, ui::StderrIsTty(), std::cerr);
  learn::FitOptions fit;
  fit.level = *level;
  fit.loco = !options.no_loco;
  fit.progress = [&](const std::string& card, int i, int n) {
    bar.SetTotal(n + 1);
    bar.Set(i, i == n ? absl::StrCat(options.question_id, " ", options.level,
                                     " ", card)
                      : absl::StrCat(options.question_id, " ", options.level,
                                     " fold ", i + 1, "/", n, " (", card, ")"));
  };
  auto report =
      learn::FitQuestion(**provider, *store, **entry, *thresholds, fit);
  bar.Finish();
  if (!report.ok())
    return Fail("fit", std::string(report.status().message()), 1);
  if (report->status == "fitted") {
    // A new immutable version bound to the model (docs/bundles.md).
    absl::Status put = PutFitBundle(config, kind, &*report);
    if (!put.ok()) return Fail("fit", std::string(put.message()), 1);
  }
  if (!options.out.empty()) {
    if (absl::Status s =
            WriteFitFiles(options.out, (*provider)->info().model, &*report);
        !s.ok()) {
      return Fail("fit", std::string(s.message()), 1);
    }
  }
  if (options.json) {
    ui::PrintJson(learn::ReportJson(*report), std::cout);
  } else {
    PrintFitSummary(*report, options, (*entry)->question.options());
  }
  return report->status == "fitted" ? 0 : 1;
}

}  // namespace mesa_anyjev::client
