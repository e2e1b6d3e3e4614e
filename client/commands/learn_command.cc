// `mesa-anyjev learn ingest|fit` (reference-system.md 3.4, 8.1-8.3).
// Exit codes: 0 ingested / fitted, 1 refused (bad rows, a fit that is not
// "fitted", a backend failure), 2 usage or missing input.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backends/daemon_client.h"
#include "client/backends/provider.h"
#include "client/bench/runner.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/learn/fit.h"
#include "client/learn/label_ingest.h"
#include "client/learn/label_store.h"
#include "client/policy/policy.h"
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
// the fit extra of 8.3) and report.json (the full report).
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
  std::cout << learn::IngestSummary(rows, *inserted).dump(1) << "\n";
  return 0;
}

int RunLearnFit(const config::Config& config, const LearnOptions& options) {
  auto entry = questions::QuestionSet::Reference().Find(options.question_id);
  if (!entry.ok()) {
    return Fail(
        "fit",
        absl::StrCat("--question: unknown question '", options.question_id,
                     "' (see `mesa-anyjev questions`)"),
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
  auto provider = MakeProvider(config, options.backend);
  if (!provider.ok()) {
    return Fail("fit", std::string(provider.status().message()),
                absl::IsInvalidArgument(provider.status()) ? 2 : 1);
  }
  bench::ProgressBar bar(1, isatty(STDERR_FILENO) != 0);
  learn::FitOptions fit;
  fit.level = *level;
  fit.loco = !options.no_loco;
  fit.progress = [&](const std::string& card, int i, int n) {
    bar.Show(absl::StrCat(options.question_id, " ", options.level, " fold ",
                          i + 1, "/", n, " (", card, ")"));
  };
  auto report =
      learn::FitQuestion(**provider, *store, **entry, *thresholds, fit);
  bar.Finish();
  if (!report.ok())
    return Fail("fit", std::string(report.status().message()), 1);
  if (report->status == "fitted") {
    // A new immutable version bound to the model (reference 8.3, step 6).
    const std::string kind =
        options.backend.empty() ? config.backend.kind : options.backend;
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
  std::cout << learn::ReportJson(*report).dump(1) << "\n";
  return report->status == "fitted" ? 0 : 1;
}

}  // namespace mesa_anyjev::client
