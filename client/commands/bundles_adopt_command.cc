// `mesa-anyjev bundles adopt` (docs/bundles.md, Agreement): a version of
// another model, for one question, becomes a version of this backend's
// model and its CURRENT, once a current agreement record between the two
// says they agree on the question. The L1 artifact (temperature and frozen
// prior) always crosses; an L2 head only between two models whose hidden
// states have the same shape. Without such a record it is refused, naming
// the bench compare that would measure one.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/backends/daemon_client.h"
#include "client/commands/agreement_access.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/ui/terminal.h"
#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {
namespace {

using bundles::Json;

// The other model's version for the question: `version`, or its CURRENT
// (an inherited one included).
absl::StatusOr<bundles::BundleVersion> OtherVersion(
    const config::Config& config, const std::string& kind,
    const std::string& question, int version) {
  if (BundlesInDaemon(kind)) {
    ASSIGN_OR_RETURN(auto client, DaemonClient::Create(config.client));
    std::string lock = BundleLockSha();
    if (version == 0) {
      ASSIGN_OR_RETURN(const RemoteBundles listed,
                       client->ListBundles(BundleLockSha()));
      if (listed.current.contains(question)) {
        version = listed.current.at(question);
      } else if (listed.inherited.contains(question)) {
        version = listed.inherited.at(question).version;
        lock = listed.inherited.at(question).lock;
      }
    }
    if (version == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the daemon's model has no CURRENT version of ",
                       question, " to adopt"));
    }
    return client->GetBundle(lock, version);
  }
  ASSIGN_OR_RETURN(auto store, OpenLocalBundleStore(config, kind));
  if (version != 0) return store->Get(version);
  ASSIGN_OR_RETURN(const std::optional<int> current, store->Current(question));
  if (current.has_value()) return store->Get(*current);
  const auto inherited = store->Inherited(
      questions::LockKeys(questions::QuestionSet::Reference()));
  if (const auto it = inherited.find(question); it != inherited.end()) {
    return bundles::BundleVersion{it->second.version, it->second.path,
                                  it->second.manifest, it->second.artifacts};
  }
  return absl::FailedPreconditionError(
      absl::StrCat("'", store->model().model, "' has no CURRENT version of ",
                   question, " to adopt"));
}

// The entries of `key` in `source`, bound to `self`: the L1 artifact, and
// the head only when both models' hidden states have one shape.
absl::StatusOr<Json> Rebound(const Json& source, const std::string& key,
                             const bundles::RecordedModel& self,
                             const bundles::RecordedModel& other,
                             bool* head_kept) {
  Json out{{"model", self.model},
           {"artifacts", Json::object()},
           {"heads", Json::object()}};
  if (!self.identity.empty()) out["model_identity"] = self.identity;
  auto rebind = [&](Json entry) {
    if (entry.is_object() && entry.contains("model")) {
      entry["model"] = self.model;
    }
    return entry;
  };
  if (source.contains("artifacts") && source["artifacts"].contains(key)) {
    out["artifacts"][key] = rebind(source["artifacts"][key]);
  }
  const bool same_shape = self.hidden.has_value() && other.hidden.has_value() &&
                          *self.hidden == *other.hidden;
  *head_kept = false;
  if (same_shape && source.contains("heads") && source["heads"].contains(key)) {
    out["heads"][key] = rebind(source["heads"][key]);
    *head_kept = true;
    for (const char* field : {"n_blocks", "hidden_size"}) {
      if (source.contains(field)) out[field] = source[field];
    }
  }
  if (out["artifacts"].empty() && out["heads"].empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "it holds only an L2 head, and a head crosses only between models "
        "whose hidden states have the same shape ('",
        other.model, "': ",
        other.hidden ? absl::StrCat(other.hidden->first, " layers x ",
                                    other.hidden->second)
                     : "none",
        "; '", self.model, "': ",
        self.hidden ? absl::StrCat(self.hidden->first, " layers x ",
                                   self.hidden->second)
                    : "none",
        ")"));
  }
  return out;
}

absl::StatusOr<std::vector<config::Override>> FromSets(
    const std::vector<std::string>& sets) {
  std::vector<config::Override> flags;
  for (const std::string& set : sets) {
    ASSIGN_OR_RETURN(config::Override parsed, config::ParseSetFlag(set));
    parsed.origin = absl::StrCat("flag --from-set ", set);
    flags.push_back(std::move(parsed));
  }
  return flags;
}

int Refuse(const std::string& message) {
  std::cout << message << "\n";
  return 1;
}

int Usage(const absl::Status& status) {
  std::cerr << "mesa-anyjev bundles adopt: " << status.message() << "\n";
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ? 2 : 1;
}

}  // namespace

int RunBundlesAdopt(const config::Config& config,
                    const BundlesCommandOptions& options) {
  const std::string kind =
      options.backend.empty() ? config.backend.kind : options.backend;
  auto entry = questions::QuestionSet::Reference().Find(options.question);
  if (!entry.ok()) return Usage(entry.status());
  const std::string key = (*entry)->question.key();
  auto flags = FromSets(options.from_sets);
  if (!flags.ok()) return Usage(flags.status());
  auto from_config = config::WithOverrides(config, *flags);
  if (!from_config.ok()) return Usage(from_config.status());

  auto self = BundleModelOf(config, kind);
  if (!self.ok()) return Usage(self.status());
  auto other = BundleModelOf(*from_config, options.from_kind);
  if (!other.ok()) return Usage(other.status());
  if (self->model == other->model && self->identity == other->identity) {
    return Usage(absl::InvalidArgumentError(
        absl::StrCat("--from ", options.from_kind, " serves '", self->model,
                     "', the model of --backend ", kind, " itself")));
  }

  // The record: current for this question's key, lock and labels.
  auto records = ListAgreementsOf(config, kind);
  if (!records.ok()) return Usage(records.status());
  const auto digests = CurrentLabelsDigests(config);
  const std::string digest =
      digests.contains(options.question) ? digests.at(options.question) : "";
  const bundles::AgreementLookup found = bundles::FindAgreement(
      records->records, self->binding(), other->binding(), BundleLockSha(),
      options.question, key, &digest);
  if (!found.record.has_value()) {
    return Refuse(absl::StrCat(
        "refused: '", other->model, "''s bundle does not load for '",
        self->model, "' on ", options.question, ": ", found.why_not,
        "; measure it with `", CompareAdvice(kind, options.from_kind), "`"));
  }

  auto source = OtherVersion(*from_config, options.from_kind, options.question,
                             options.version);
  if (!source.ok()) return Refuse(std::string(source.status().message()));
  auto source_key =
      bundles::QuestionKey(source->version, source->manifest, options.question);
  if (!source_key.ok())
    return Refuse(std::string(source_key.status().message()));
  if (*source_key != key) {
    return Refuse(
        absl::StrCat("refused: v", source->version, " of '", other->model,
                     "' was fit for key ", source_key->substr(0, 12), ", ",
                     options.question, "'s key is now ", key.substr(0, 12)));
  }
  bool head_kept = false;
  auto artifacts = Rebound(source->artifacts, key, *self, *other, &head_kept);
  if (!artifacts.ok()) {
    return Refuse(absl::StrCat("refused: v", source->version, " of '",
                               other->model, "' for ", options.question, ": ",
                               artifacts.status().message()));
  }

  const Json& m = source->manifest;
  Json extra;
  extra["per_question"] =
      Json{{options.question, m["per_question"][options.question]}};
  if (m.contains("validation") && m["validation"].is_object() &&
      m["validation"].contains(options.question)) {
    extra["validation"] =
        Json{{options.question, m["validation"][options.question]}};
  }
  if (m.contains("fitted_on")) extra["fitted_on"] = m["fitted_on"];
  extra["adopted_from"] = RecordedModelJson(*other);
  extra["adopted_from"]["version"] = source->version;
  extra["adopted_from"]["questions_lock_sha"] =
      m.value("questions_lock_sha", std::string());
  extra["adopted_from"]["head"] = head_kept;
  extra["adopted_from"]["agreement"] =
      Json{{"path", found.path}, {"date", (*found.record)["date"]}};

  absl::StatusOr<int> put;
  absl::StatusOr<bundles::PointerMove> moved;
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return Usage(client.status());
    put = (*client)->PutBundle(BundleLockSha(), *artifacts, extra);
    if (put.ok()) {
      moved = (*client)->PromoteBundle(BundleLockSha(), *put, options.question,
                                       options.force);
    }
  } else {
    auto store = OpenLocalBundleStore(config, kind);
    if (!store.ok()) return Usage(store.status());
    put = (*store)->Put(*artifacts, extra);
    if (put.ok())
      moved = (*store)->Promote(*put, options.question, options.force);
  }
  if (!put.ok()) return Refuse(std::string(put.status().message()));
  if (!moved.ok()) {
    return Refuse(absl::StrCat(
        "adopted as v", *put, " but not promoted: ", moved.status().message()));
  }
  if (options.json) {
    ui::PrintJson(Json{{"question", options.question},
                       {"from", extra["adopted_from"]},
                       {"version", *put},
                       {"current", moved->version},
                       {"head", head_kept}},
                  std::cout);
  } else {
    std::cout << "adopted v" << source->version << " of " << other->model
              << " for " << options.question << " as v" << *put
              << (head_kept ? "" : " (its L1 artifact; no head)")
              << "; CURRENT -> v" << moved->version << "\n";
  }
  return 0;
}

}  // namespace mesa_anyjev::client
