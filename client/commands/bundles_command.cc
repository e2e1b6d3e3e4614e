// bundles list / bundles rollback / learn promote (docs/bundles.md). fake and
// gateway use the local store under artifacts.dir for "fake" /
// backend.canonical_model; hf and composite go through the daemon's Bundles
// service, whose store lives on its host. Bundles are keyed by the lock sha of
// the built-in question set.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/backends/daemon_client.h"
#include "client/commands/agreement_access.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/ui/table.h"
#include "client/ui/terminal.h"
#include "common/bundles/bundle_store.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {
namespace {

using bundles::BundleStore;
using bundles::Json;

std::string Kind(const config::Config& config, const std::string& backend) {
  return backend.empty() ? config.backend.kind : backend;
}

struct Listing {
  std::string model;
  std::string dir;
  std::vector<bundles::VersionEntry> versions;
  std::map<std::string, int> current;
  std::map<std::string, bundles::InheritedVersion> inherited;
  std::vector<bundles::StoredAgreement> agreements;
};

absl::StatusOr<Listing> Load(const config::Config& config,
                             const std::string& kind) {
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return client.status();
    auto remote = (*client)->ListBundles(BundleLockSha());
    if (!remote.ok()) return remote.status();
    return Listing{remote->model,
                   remote->dir,
                   std::move(remote->versions),
                   std::move(remote->current),
                   std::move(remote->inherited),
                   std::move(remote->agreements)};
  }
  auto store = OpenLocalBundleStore(config, kind);
  if (!store.ok()) return store.status();
  auto versions = (*store)->List();
  if (!versions.ok()) return versions.status();
  auto current = (*store)->CurrentAll();
  if (!current.ok()) return current.status();
  return Listing{(*store)->model().model,
                 (*store)->dir(),
                 *std::move(versions),
                 *std::move(current),
                 (*store)->Inherited(
                     questions::LockKeys(questions::QuestionSet::Reference())),
                 bundles::ListAgreements((*store)->dir())};
}

// The LOCO figure of a manifest for a question, as the table shows it.
std::string Metric(const Json& manifest, const std::string& id,
                   const char* key) {
  Json loco;
  if (manifest.contains("validation") && manifest["validation"].is_object() &&
      manifest["validation"].contains(id) &&
      manifest["validation"][id].is_object()) {
    loco = manifest["validation"][id].value("loco", Json());
  }
  if (!loco.is_object() || !loco.contains(key)) return "-";
  const Json& v = loco[key];
  if (v.is_number_integer()) return absl::StrCat(v.get<int64_t>());
  return v.is_number() ? absl::StrFormat("%.3f", v.get<double>()) : "-";
}

std::string LevelOf(const Json& manifest, const std::string& id) {
  const Json per = manifest.value("per_question", Json::object());
  return per.is_object() && per.contains(id) && per[id].is_object()
             ? per[id].value("level", std::string("?"))
             : std::string("?");
}

// Where a command moves a question's CURRENT: the daemon's store (through
// its Bundles service, which then serves the move) or the local one.
class PointerStore {
 public:
  static absl::StatusOr<PointerStore> Open(const config::Config& config,
                                           const std::string& kind) {
    PointerStore out;
    if (BundlesInDaemon(kind)) {
      ASSIGN_OR_RETURN(out.daemon_, DaemonClient::Create(config.client));
    } else {
      ASSIGN_OR_RETURN(out.local_, OpenLocalBundleStore(config, kind));
    }
    return out;
  }

  absl::StatusOr<bundles::PointerMove> Promote(int version,
                                               const std::string& question,
                                               bool force) {
    return daemon_ != nullptr ? daemon_->PromoteBundle(BundleLockSha(), version,
                                                       question, force)
                              : local_->Promote(version, question, force);
  }

  absl::StatusOr<bundles::PointerMove> Rollback(const std::string& question) {
    return daemon_ != nullptr
               ? daemon_->RollbackBundle(BundleLockSha(), question)
               : local_->Rollback(question);
  }

 private:
  std::unique_ptr<DaemonClient> daemon_;
  std::unique_ptr<BundleStore> local_;
};

Json MoveJson(const std::string& question, const bundles::PointerMove& moved) {
  return Json{{"question", question},
              {"current", moved.version},
              {"previous", moved.previous.has_value() ? Json(*moved.previous)
                                                      : Json(nullptr)}};
}

int Failed(const absl::Status& status) {
  std::cerr << "mesa-anyjev: " << status.message() << "\n";
  return absl::IsInvalidArgument(status) ? 2 : 1;
}

}  // namespace

int RunBundlesList(const config::Config& config,
                   const BundlesCommandOptions& options) {
  auto listing = Load(config, Kind(config, options.backend));
  if (!listing.ok()) return Failed(listing.status());
  if (options.json) {
    Json out;
    out["model"] = listing->model;
    out["dir"] = listing->dir;
    out["current"] = listing->current;
    out["versions"] = Json::array();
    for (const auto& entry : listing->versions) {
      Json v;
      v["version"] = entry.version;
      v["path"] = entry.path;
      v["current_for"] = Json::array();
      for (const auto& [id, n] : listing->current) {
        if (n == entry.version) v["current_for"].push_back(id);
      }
      if (entry.manifest.ok()) {
        v["manifest"] = *entry.manifest;
      } else {
        v["error"] = std::string(entry.manifest.status().message());
      }
      out["versions"].push_back(std::move(v));
    }
    out["inherited"] = Json::object();
    for (const auto& [id, from] : listing->inherited) {
      out["inherited"][id] = Json{{"lock", from.lock},
                                  {"version", from.version},
                                  {"manifest", from.manifest}};
    }
    out["agreements"] =
        AgreementsJson(listing->agreements, {listing->model, ""},
                       CurrentLabelsDigests(config));
    ui::PrintJson(out, std::cout);
    return 0;
  }
  std::cout << "bundles of " << listing->model << " in " << listing->dir
            << "\n";
  // One row per version and question it holds; * marks a CURRENT one.
  ui::Table table({{"version"},
                   {"question"},
                   {"level"},
                   {"acc", ui::Align::kRight},
                   {"ECE", ui::Align::kRight},
                   {"n", ui::Align::kRight},
                   {"created"},
                   {"current"}});
  for (const auto& entry : listing->versions) {
    const std::string version = absl::StrCat("v", entry.version);
    if (!entry.manifest.ok()) {
      if (options.question.empty()) {
        table.AddRow({version, "(unreadable)", "", "", "", "", "",
                      std::string(entry.manifest.status().message())});
      }
      continue;
    }
    const Json& m = *entry.manifest;
    const Json per = m.value("per_question", Json::object());
    if (!per.is_object()) continue;
    for (const auto& [id, fit] : per.items()) {
      if (!options.question.empty() && id != options.question) continue;
      const auto current = listing->current.find(id);
      const bool is_current =
          current != listing->current.end() && current->second == entry.version;
      table.AddRow({version, id, LevelOf(m, id), Metric(m, id, "acc"),
                    Metric(m, id, "ece"), Metric(m, id, "n"),
                    m.value("created", std::string()), is_current ? "*" : ""});
    }
  }
  // A question this lock has no CURRENT for, served by an earlier lock's.
  for (const auto& [id, from] : listing->inherited) {
    if (!options.question.empty() && id != options.question) continue;
    const Json& m = from.manifest;
    table.AddRow({absl::StrCat("v", from.version), id, LevelOf(m, id),
                  Metric(m, id, "acc"), Metric(m, id, "ece"),
                  Metric(m, id, "n"), m.value("created", std::string()),
                  absl::StrCat("* inherited from lock ", from.lock)});
  }
  const std::vector<std::string> agreements = AgreementLines(
      listing->agreements, {listing->model, ""}, CurrentLabelsDigests(config));
  if (table.empty()) {
    std::cout << (options.question.empty()
                      ? "no versions yet: `mesa-anyjev learn fit` writes one\n"
                      : absl::StrCat("no version holds ", options.question,
                                     "\n"));
  } else {
    table.Print(std::cout, ui::OutputColumns());
  }
  if (!agreements.empty()) {
    std::cout << "agreements (" << listing->dir << "/agreements):\n";
    for (const std::string& line : agreements) {
      std::cout << "  " << line << "\n";
    }
  }
  return 0;
}

int RunLearnPromote(const config::Config& config,
                    const BundlesCommandOptions& options) {
  auto store = PointerStore::Open(config, Kind(config, options.backend));
  if (!store.ok()) return Failed(store.status());
  const auto moved =
      store->Promote(options.version, options.question, options.force);
  if (moved.ok()) {
    if (options.json) {
      ui::PrintJson(MoveJson(options.question, *moved), std::cout);
    } else {
      std::cout << "CURRENT -> v" << moved->version << "\n";
    }
    return 0;
  }
  if (absl::IsNotFound(moved.status())) {
    std::cout << "no version v" << options.version << "\n";
    return 1;
  }
  if (absl::IsFailedPrecondition(moved.status())) {
    std::cout << moved.status().message() << "\n";  // the gate, the binding
    return 1;
  }
  Failed(moved.status());
  return 1;  // the reference: any other path exits 1
}

int RunBundlesRollback(const config::Config& config,
                       const BundlesCommandOptions& options) {
  auto store = PointerStore::Open(config, Kind(config, options.backend));
  if (!store.ok()) return Failed(store.status());
  const auto moved = store->Rollback(options.question);
  if (!moved.ok()) {
    std::cout << moved.status().message() << "\n";
    return 1;
  }
  if (options.json) {
    ui::PrintJson(MoveJson(options.question, *moved), std::cout);
    return 0;
  }
  std::cout << "CURRENT -> v" << moved->version << " (was v"
            << moved->previous.value_or(0) << ")\n";
  return 0;
}

}  // namespace mesa_anyjev::client
