// Agreement records for the CLI (see agreement_access.h).
#include "client/commands/agreement_access.h"

#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/backends/composite_provider.h"
#include "client/backends/daemon_client.h"
#include "client/bench/compare.h"
#include "client/bench/task.h"
#include "client/commands/bundle_access.h"
#include "client/learn/label_store.h"
#include "client/policy/policy.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"

namespace mesa_anyjev::client {

using Json = nlohmann::ordered_json;

bundles::RecordedModel RecordedModelOf(const ProviderInfo& info) {
  bundles::RecordedModel model{info.model, info.identity, info.kind,
                               std::nullopt};
  if (info.hidden_states && info.n_layers > 0) {
    model.hidden = std::pair<int, int>{info.n_layers, info.hidden_size};
  }
  return model;
}

Json RecordedModelJson(const bundles::RecordedModel& model) {
  Json out{{"model", model.model},
           {"model_identity", model.identity},
           {"backend_kind", model.kind},
           {"hidden", nullptr}};
  if (model.hidden.has_value()) {
    out["hidden"] = Json{{"n_layers", model.hidden->first},
                         {"hidden_size", model.hidden->second}};
  }
  return out;
}

std::map<std::string, std::string> CurrentLabelsDigests(
    const config::Config& config) {
  std::map<std::string, std::string> out;
  auto store = learn::LabelStore::Open(config.labels.dir);
  if (!store.ok()) return out;  // no labels: every digest differs
  for (const bench::Task& task :
       bench::TasksFromStore(*store, questions::QuestionSet::Reference(),
                             policy::Policy::Defaults())) {
    out[task.question_id] = bench::LabelsSha256(task);
  }
  return out;
}

absl::StatusOr<std::string> KeepAgreement(const config::Config& config,
                                          const std::string& kind,
                                          const bundles::ModelBinding& self,
                                          const Json& record) {
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return client.status();
    return (*client)->PutAgreement(BundleLockSha(), record);
  }
  return bundles::WriteAgreement(
      bundles::LockDirOf(config.artifacts.dir, self.model, BundleLockSha()),
      self, record);
}

absl::StatusOr<AgreementListing> ListAgreementsOf(const config::Config& config,
                                                  const std::string& kind) {
  if (BundlesInDaemon(kind)) {
    auto client = DaemonClient::Create(config.client);
    if (!client.ok()) return client.status();
    auto listed = (*client)->ListBundles(BundleLockSha());
    if (!listed.ok()) return listed.status();
    return AgreementListing{listed->dir, std::move(listed->agreements)};
  }
  const std::string dir = bundles::LockDirOf(
      config.artifacts.dir, BundleModelFor(config, kind), BundleLockSha());
  return AgreementListing{dir, bundles::ListAgreements(dir)};
}

namespace {

// Each record's standing per question it measured, judged now.
template <typename Each>
void ForEachStanding(const std::vector<bundles::StoredAgreement>& records,
                     const bundles::ModelBinding& self,
                     const std::map<std::string, std::string>& labels,
                     Each each) {
  const std::map<std::string, std::string> keys =
      questions::LockKeys(questions::QuestionSet::Reference());
  for (const bundles::StoredAgreement& stored : records) {
    if (!stored.record.ok()) {
      each(stored, nullptr, "", bundles::Standing{});
      continue;
    }
    for (const auto& [id, unused] : (*stored.record)["questions"].items()) {
      const auto key = keys.find(id);
      const auto digest = labels.find(id);
      const std::string none;
      const bundles::Standing standing =
          bundles::StandingOf(*stored.record, self, nullptr, BundleLockSha(),
                              id, key == keys.end() ? none : key->second,
                              digest == labels.end() ? &none : &digest->second);
      each(stored, &*stored.record, id, standing);
    }
  }
}

}  // namespace

std::vector<std::string> AgreementLines(
    const std::vector<bundles::StoredAgreement>& records,
    const bundles::ModelBinding& self,
    const std::map<std::string, std::string>& labels_digests) {
  std::vector<std::string> lines;
  ForEachStanding(
      records, self, labels_digests,
      [&](const bundles::StoredAgreement& stored, const Json* record,
          const std::string& id, const bundles::Standing& standing) {
        if (record == nullptr) {
          lines.push_back(absl::StrCat(
              stored.path, ": unreadable: ", stored.record.status().message()));
          return;
        }
        lines.push_back(absl::StrCat(
            standing.other.model, " (", standing.other.kind, ") ",
            (*record)["date"].get<std::string>(), ": ", id, " ",
            standing.verdict,
            standing.why.empty() ? "" : absl::StrCat(" (", standing.why, ")")));
      });
  return lines;
}

Json AgreementsJson(const std::vector<bundles::StoredAgreement>& records,
                    const bundles::ModelBinding& self,
                    const std::map<std::string, std::string>& labels_digests) {
  Json out = Json::array();
  std::map<std::string, size_t> at;  // path -> index in out
  ForEachStanding(
      records, self, labels_digests,
      [&](const bundles::StoredAgreement& stored, const Json* record,
          const std::string& id, const bundles::Standing& standing) {
        if (record == nullptr) {
          out.push_back(
              Json{{"path", stored.path},
                   {"error", std::string(stored.record.status().message())}});
          return;
        }
        if (!at.contains(stored.path)) {
          at[stored.path] = out.size();
          out.push_back(Json{{"path", stored.path},
                             {"date", (*record)["date"]},
                             {"other", RecordedModelJson(standing.other)},
                             {"questions", Json::object()}});
        }
        out[at[stored.path]]["questions"][id] =
            Json{{"verdict", standing.verdict}, {"why", standing.why}};
      });
  return out;
}

void EnableAgreedFailover(const config::Config& config, Provider* provider) {
  auto* composite = dynamic_cast<CompositeProvider*>(provider);
  if (composite == nullptr || !config.backend.failover_to_daemon) return;
  const bundles::ModelBinding gateway{config.backend.canonical_model, ""};
  const bundles::ModelBinding daemon{composite->info().model,
                                     composite->info().identity};
  // The records beside the gateway model's bundles and beside the daemon's.
  std::vector<bundles::StoredAgreement> records = bundles::ListAgreements(
      bundles::LockDirOf(config.artifacts.dir, gateway.model, BundleLockSha()));
  auto remote = composite->daemon().client().ListBundles(BundleLockSha());
  if (remote.ok()) {
    for (auto& stored : remote->agreements)
      records.push_back(std::move(stored));
  }
  const auto digests = CurrentLabelsDigests(config);
  std::set<std::string> keys;
  std::vector<std::string> ids;
  std::string why_not;
  for (const auto& entry : questions::QuestionSet::Reference().entries()) {
    const auto digest = digests.find(entry.id());
    const std::string none;
    const bundles::AgreementLookup found = bundles::FindAgreement(
        records, gateway, daemon, BundleLockSha(), entry.id(),
        entry.question.key(),
        digest == digests.end() ? &none : &digest->second);
    if (found.record.has_value()) {
      keys.insert(entry.question.key());
      ids.push_back(entry.id());
    } else if (why_not.empty()) {
      why_not = found.why_not;
    }
  }
  if (ids.empty()) {
    std::cerr << "failover: no question may be served by the daemon when the "
                 "gateway fails ("
              << why_not << "; measure with `" << CompareAdvice("gateway", "hf")
              << "`)\n";
  } else {
    std::cerr << "failover: when the gateway fails, " << daemon.model
              << " may serve " << absl::StrJoin(ids, ", ") << "\n";
  }
  composite->AllowFailover(std::move(keys));
}

std::string CompareAdvice(const std::string& self_kind,
                          const std::string& other_kind) {
  return absl::StrCat("mesa-anyjev bench compare --a ", self_kind, " --b ",
                      other_kind);
}

}  // namespace mesa_anyjev::client
