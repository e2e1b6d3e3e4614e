// Agreement records (docs/bundles.md, Agreement): what `bench compare`
// measured between two models, kept beside each model's bundles under the
// questions lock it was measured with:
//
//   <root>/<model_slug>/<lock_sha[:8]>/agreements/<other_slug>.<id12>.json
//
// {"record": "mesa-anyjev agreement v1", "date", "questions_lock_sha",
//  "labels_sha256", "models": [a, b] ({model, model_identity, backend_kind,
//  hidden: {n_layers, hidden_size} | null}), "tolerances", "bootstrap",
//  "questions": {qid: {key, labels_sha256, n, verdict, levels}}}
//
// A record speaks for a question only while it is current: both models
// still the ones recorded, the same lock, the question's key and labels
// unchanged. A stale record unlocks nothing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/bundles/bundle_manifest.h"

namespace mesa_anyjev::bundles {

inline constexpr char kAgreementRecord[] = "mesa-anyjev agreement v1";
inline constexpr char kAgreementsDir[] = "agreements";

// One model of a record, as its manifests record it.
struct RecordedModel {
  std::string model;
  std::string identity;  // "" where the model reports none (a gateway)
  std::string kind;      // the backend kind it was reached through
  // n_layers and hidden_size where it serves hidden states.
  std::optional<std::pair<int, int>> hidden;

  ModelBinding binding() const { return {model, identity}; }
};

// INVALID_ARGUMENT naming the field when `record` is not a v1 record.
absl::Status CheckAgreementRecord(const Json& record);

// The record's two models, a then b (the record passed the check).
std::vector<RecordedModel> RecordedModels(const Json& record);

// Whether `binding` is the recorded model: the same name, and the same
// identity where both have one.
bool SameModel(const RecordedModel& recorded, const ModelBinding& binding);

// The file a record is kept under in `self`'s lock directory: named after
// the other model of the pair, so a new measurement of the pair replaces it.
std::string AgreementFileName(const RecordedModel& other);

// Writes `record` (checked) into <lock_dir>/agreements/ under the name of
// its model that is not `self`: temporary file, fsync, rename, fsync.
// FAILED_PRECONDITION when neither of its models is `self`. Returns the
// path.
absl::StatusOr<std::string> WriteAgreement(const std::string& lock_dir,
                                           const ModelBinding& self,
                                           const Json& record);

struct StoredAgreement {
  std::string path;
  absl::StatusOr<Json> record;  // a file that does not parse or check
};
// The records under <lock_dir>/agreements/, by file name; none when the
// directory does not exist.
std::vector<StoredAgreement> ListAgreements(const std::string& lock_dir);

// What a record says of one question now.
struct Standing {
  std::string verdict;  // "agree", "disagree", "n/a" or "stale"
  std::string why;      // for stale: what no longer matches
  RecordedModel other;  // the model of the pair that is not self
  bool unlocks() const { return verdict == "agree"; }
};
// `self` is the model asking; `other_now`, when known, the other model as
// it is now; `labels_sha256_now`, when known, the digest of the labels the
// question has now. Stale when self or other_now is not the recorded
// model, the record's lock is not `lock_sha`, the question's key is not
// `live_key`, or its labels digest changed; "n/a" when the record has no
// verdict for the question.
Standing StandingOf(const Json& record, const ModelBinding& self,
                    const ModelBinding* other_now, const std::string& lock_sha,
                    const std::string& question_id, const std::string& live_key,
                    const std::string* labels_sha256_now);

// The current record of `records` (a lock directory's, ListAgreements, or
// a daemon's, listed over gRPC) between `self` and `other` that agrees on
// `question_id`, if any; else why not (no record, disagree, stale), for
// the refusal to name.
struct AgreementLookup {
  std::optional<Json> record;
  std::string path;
  std::string why_not;
};
AgreementLookup FindAgreement(const std::vector<StoredAgreement>& records,
                              const ModelBinding& self,
                              const ModelBinding& other,
                              const std::string& lock_sha,
                              const std::string& question_id,
                              const std::string& live_key,
                              const std::string* labels_sha256_now);

}  // namespace mesa_anyjev::bundles
