// What a decider has learned, per question key (docs/decision.md, Heads/
// export file): L1 temperature artifacts, L2 heads (HeadStore routes a
// question to one), the heads' adaptation statistics and the observations
// observe() recorded. Loads parse all they were given (artifact_file.h)
// before anything is stored; an export writes the file the anyjev package
// reads. Safe under concurrent callers: what a call serves it reads once,
// from a snapshot.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"
#include "common/decision/adaptation_store.h"
#include "common/decision/head_store.h"
#include "common/decision/observation_store.h"
#include "common/decision/question.h"
#include "common/decision/temperature_scaler.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

struct LoadedArtifacts;

// The L1 artifacts and head routes of one call's questions, read once when
// it starts: a concurrent swap (a bundle promote or rollback) can then
// neither mix two versions in one call nor take away what the call was
// admitted on. By question key; a key not taken has neither.
struct ArtifactSnapshot {
  absl::flat_hash_map<std::string, std::shared_ptr<const TemperatureScaler>> l1;
  absl::flat_hash_map<std::string, std::optional<RoutedHead>> routes;

  std::shared_ptr<const TemperatureScaler> L1(const std::string& key) const;
  std::optional<RoutedHead> Route(const Question& question) const;
};

class ArtifactStore {
 public:
  // `model` (the served model, whose name, identity and shape files are
  // checked against) outlives the store.
  explicit ArtifactStore(const Backend* model) : model_(model) {}

  // The L1 artifact and head route of each question; under `exact_heads` a
  // head routed from another key counts as none.
  ArtifactSnapshot Snapshot(const std::vector<Question>& questions,
                            bool exact_heads) const;
  std::shared_ptr<const TemperatureScaler> L1(const std::string& key) const;
  std::optional<RoutedHead> Route(const Question& question) const {
    return heads_.Route(question);
  }
  bool HasHead(const std::string& key) const { return heads_.Has(key); }

  // Store what a fit made, returning its entry as a file holds it (a head
  // gets its version here).
  nlohmann::ordered_json KeepL1(const std::string& key,
                                std::shared_ptr<const TemperatureScaler> l1);
  nlohmann::ordered_json KeepHead(const std::string& key, HeadEntry entry);
  AdaptationStore& adaptation() { return adaptation_; }
  const AdaptationStore& adaptation() const { return adaptation_; }
  ObservationStore& observations() { return observations_; }

  // One artifact for one question (L1 or a head); see ParseArtifact.
  absl::Status LoadArtifact(const Question& question,
                            const nlohmann::ordered_json& artifact);
  // A whole heads/export file; returns the number of L1 artifacts and heads
  // loaded. Refused, with nothing changed, when any entry is.
  absl::StatusOr<int> Load(const nlohmann::ordered_json& file);
  // Makes the L1 artifact and head of `key` exactly those a heads/export
  // file holds under it (a bundle version being served): present ones load
  // as Load would, absent ones are dropped. The new one is in place before
  // the other kind is dropped, so a concurrent auto call is served from the
  // old or the new version, never from neither.
  absl::Status ReplaceKey(const std::string& key,
                          const nlohmann::ordered_json& file);
  // {"model", "artifacts", "heads"[, "adaptation"][, "observations"]};
  // the adaptation statistics as `tenant` sees them.
  nlohmann::ordered_json Export(bool include_observations,
                                const std::string& tenant = "") const;

 private:
  absl::Status Commit(LoadedArtifacts loaded);
  void PutL1(const std::string& key,
             std::shared_ptr<const TemperatureScaler> l1);

  const Backend* const model_;
  mutable absl::Mutex mu_;
  std::vector<std::string> l1_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const TemperatureScaler>> l1_
      ABSL_GUARDED_BY(mu_);
  HeadStore heads_;
  AdaptationStore adaptation_;
  ObservationStore observations_;
};

}  // namespace mesa_anyjev::decision
