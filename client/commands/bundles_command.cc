// bundles list / bundles rollback / learn promote (reference-system.md 3.4,
// 3.6; docs/bundles.md). fake and gateway use the local store under
// artifacts.dir for "fake" / backend.canonical_model; hf and composite go
// through the daemon's Bundles service, whose store lives on its host.
// Bundles are keyed by the lock sha of the built-in question set.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/backends/daemon_client.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "common/bundles/bundle_store.h"
#include "common/decision/py_format.h"
#include "common/fake_backend.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"

namespace mesa_anyjev::client {
namespace {

using bundles::BundleStore;
using bundles::Json;

std::string Kind(const config::Config& config, const std::string& backend) {
  return backend.empty() ? config.backend.kind : backend;
}

// Python's repr of a JSON value, as the reference prints manifest fields.
std::string PyRepr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::number_float:
      return decision::PyFloatRepr(value.get<double>());
    case Json::value_t::string: {
      const std::string text = value.get<std::string>();
      const char quote = text.find('\'') != std::string::npos &&
                                 text.find('"') == std::string::npos
                             ? '"'
                             : '\'';
      std::string out(1, quote);
      for (const char c : text) {
        if (c == '\\' || c == quote) out += '\\';
        if (c == '\n') {
          out += "\\n";
          continue;
        }
        out += c;
      }
      return out + quote;
    }
    case Json::value_t::array: {
      std::vector<std::string> items;
      for (const Json& item : value) items.push_back(PyRepr(item));
      return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
    }
    case Json::value_t::object: {
      std::vector<std::string> items;
      for (const auto& [k, v] : value.items()) {
        items.push_back(absl::StrCat(PyRepr(Json(k)), ": ", PyRepr(v)));
      }
      return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
    }
    default:
      return value.dump();
  }
}

struct Listing {
  std::string model;
  std::string dir;
  std::vector<bundles::VersionEntry> versions;
  std::map<std::string, int> current;
};

absl::StatusOr<Listing> Load(const config::Config& config,
                             const std::string& kind) {
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return client.status();
    auto remote = (*client)->ListBundles(BundleLockSha());
    if (!remote.ok()) return remote.status();
    return Listing{remote->model, remote->dir, std::move(remote->versions),
                   std::move(remote->current)};
  }
  auto store = OpenLocalBundleStore(config, kind);
  if (!store.ok()) return store.status();
  auto versions = (*store)->List();
  if (!versions.ok()) return versions.status();
  auto current = (*store)->CurrentAll();
  if (!current.ok()) return current.status();
  return Listing{(*store)->model().model, (*store)->dir(), *std::move(versions),
                 *std::move(current)};
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
  auto is_current = [&](const std::string& id, int version) {
    const auto it = listing->current.find(id);
    return it != listing->current.end() && it->second == version;
  };
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
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  if (listing->versions.empty()) {
    std::cout << "no artifacts under " << listing->dir << "\n";
    return 0;
  }
  for (const auto& entry : listing->versions) {
    bool mark = false;
    if (!options.question.empty()) {
      mark = is_current(options.question, entry.version);
    } else {
      for (const auto& [id, n] : listing->current) {
        mark = mark || n == entry.version;
      }
    }
    std::cout << (mark ? "*" : " ") << " v" << entry.version << "  "
              << entry.path << "\n";
    if (!entry.manifest.ok()) {
      std::cout << "    unreadable: " << entry.manifest.status().message()
                << "\n";
      continue;
    }
    const Json& m = *entry.manifest;
    Json ids = Json::array();
    if (m.contains("per_question") && m["per_question"].is_object()) {
      for (const auto& [id, ignored] : m["per_question"].items()) {
        ids.push_back(id);
      }
    }
    Json loco = Json::object();
    if (m.contains("validation") && m["validation"].is_object()) {
      for (const auto& [id, v] : m["validation"].items()) {
        loco[id] = v.is_object() && v.contains("loco") ? v["loco"] : Json();
      }
    }
    std::cout << "    fitted_on=" << PyRepr(m.value("fitted_on", Json()))
              << " questions=" << PyRepr(ids) << "\n";
    std::cout << "    loco=" << PyRepr(loco) << "\n";
  }
  return 0;
}

int RunLearnPromote(const config::Config& config,
                    const BundlesCommandOptions& options) {
  const std::string kind = Kind(config, options.backend);
  absl::StatusOr<bundles::PointerMove> moved;
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return Failed(client.status());
    moved = (*client)->PromoteBundle(BundleLockSha(), options.version,
                                     options.question, options.force);
  } else {
    auto store = OpenLocalBundleStore(config, kind);
    if (!store.ok()) return Failed(store.status());
    moved = (*store)->Promote(options.version, options.question, options.force);
  }
  if (moved.ok()) {
    std::cout << "CURRENT -> v" << moved->version << "\n";
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
  const std::string kind = Kind(config, options.backend);
  absl::StatusOr<bundles::PointerMove> moved;
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return Failed(client.status());
    moved = (*client)->RollbackBundle(BundleLockSha(), options.question);
  } else {
    auto store = OpenLocalBundleStore(config, kind);
    if (!store.ok()) return Failed(store.status());
    moved = (*store)->Rollback(options.question);
  }
  if (!moved.ok()) {
    std::cout << moved.status().message() << "\n";
    return 1;
  }
  std::cout << "CURRENT -> v" << moved->version << " (was v"
            << moved->previous.value_or(0) << ")\n";
  return 0;
}

}  // namespace mesa_anyjev::client
