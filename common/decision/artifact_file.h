// The heads/export file (docs/decision.md, Heads/export file), the JSON the
// anyjev package reads and writes: one question's artifact or a whole file,
// parsed and checked against the served model before anything is stored;
// and the entries written back. Each kind of entry (an L1 temperature, a
// head, adaptation statistics, observations) has one parser.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/decision/adaptation_store.h"
#include "common/decision/head_store.h"
#include "common/decision/observation_store.h"
#include "common/decision/question.h"
#include "common/decision/temperature_scaler.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

// What a load holds, parsed and checked; heads carry their versions.
struct LoadedArtifacts {
  std::vector<std::pair<std::string, std::shared_ptr<const TemperatureScaler>>>
      artifacts;
  std::vector<std::pair<std::string, std::shared_ptr<const HeadEntry>>> heads;
  std::vector<std::pair<std::string, AdaptationStats>> adaptation;
  std::vector<LoadedObservations> observations;
};

// One artifact for `question` (an L1 temperature or a head): refused when it
// names another model, when a head or a prior-carrying L1 artifact was fit
// on another question layout, or when its method has no loader.
absl::StatusOr<LoadedArtifacts> ParseArtifact(
    const Backend& model, const Question& question,
    const nlohmann::ordered_json& artifact);
// A whole heads/export file; refused when it was fit on another model (its
// name, identity, n_blocks or hidden_size).
absl::StatusOr<LoadedArtifacts> ParseArtifactsFile(
    const Backend& model, const nlohmann::ordered_json& file);

// The file's model fields: "model", then "model_identity" when the model
// has one, "n_blocks" and "hidden_size" when it serves hidden states.
nlohmann::ordered_json FileModelFields(const Backend& model);
// The entry of an L1 artifact under `key`.
nlohmann::ordered_json L1ArtifactJson(const Backend& model,
                                      const std::string& key,
                                      const TemperatureScaler& scaler);
// The entry of a head under `key`.
nlohmann::ordered_json HeadArtifactJson(const Backend& model,
                                        const std::string& key,
                                        const HeadEntry& entry);
// `entry` with its version: 16 hex of sha256 over its entry (version
// cleared), so the same head has the same version after an export and a
// reload.
std::shared_ptr<const HeadEntry> Versioned(const Backend& model,
                                           const std::string& key,
                                           HeadEntry entry);
nlohmann::ordered_json AdaptationJson(const AdaptationStats& stats);

}  // namespace mesa_anyjev::decision
