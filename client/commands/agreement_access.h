// Agreement records as the CLI reaches them (docs/bundles.md, Agreement):
// beside a backend kind's bundles (the local store for fake and gateway,
// the daemon's Bundles service for hf and composite), and judged against
// what the CLI knows now: the questions lock it was built with and the
// labels in the label store.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "common/bundles/agreement_record.h"
#include "common/config/config.h"

namespace mesa_anyjev::client {

// The model a provider stands for in a record (as its manifests record it).
bundles::RecordedModel RecordedModelOf(const ProviderInfo& info);
nlohmann::ordered_json RecordedModelJson(const bundles::RecordedModel& model);

// The labels digest of each question that has labels now (the one bench
// compare records: bench::LabelsSha256 of its task).
std::map<std::string, std::string> CurrentLabelsDigests(
    const config::Config& config);

// Keeps `record` beside the bundles of `kind` (the model `self`): the local
// store's lock directory, or the daemon at client.address. Returns where.
absl::StatusOr<std::string> KeepAgreement(const config::Config& config,
                                          const std::string& kind,
                                          const bundles::ModelBinding& self,
                                          const nlohmann::ordered_json& record);

// The records beside `kind`'s bundles under the CLI's lock (`dir` names
// where they are); from the daemon for hf and composite.
struct AgreementListing {
  std::string dir;
  std::vector<bundles::StoredAgreement> records;
};
absl::StatusOr<AgreementListing> ListAgreementsOf(const config::Config& config,
                                                  const std::string& kind);

// One line per record and question for people: "<other model> (<kind>)
// <date>: <qid> agree|disagree|n/a|stale (<why>)", judged against the CLI's
// lock, the live keys and the current labels.
std::vector<std::string> AgreementLines(
    const std::vector<bundles::StoredAgreement>& records,
    const bundles::ModelBinding& self,
    const std::map<std::string, std::string>& labels_digests);

// The same as JSON: [{path, date, other {model, model_identity,
// backend_kind}, questions {qid: {verdict, why}}} | {path, error}].
nlohmann::ordered_json AgreementsJson(
    const std::vector<bundles::StoredAgreement>& records,
    const bundles::ModelBinding& self,
    const std::map<std::string, std::string>& labels_digests);

// backend.failover_to_daemon for a composite: the questions whose raw, L0
// and L1 the daemon may serve when the gateway fails, those a current
// record between the gateway's model (backend.canonical_model) and the
// daemon's says agree on (records beside either's bundles). Says on stderr
// which, or that none may. Nothing when the switch is off or `provider` is
// not a composite.
void EnableAgreedFailover(const config::Config& config, Provider* provider);

// The command that measures whether `self_kind`'s model agrees with
// `other_kind`'s, for refusals to name.
std::string CompareAdvice(const std::string& self_kind,
                          const std::string& other_kind);

}  // namespace mesa_anyjev::client
