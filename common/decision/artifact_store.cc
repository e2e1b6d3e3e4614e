// The decider's artifacts (see artifact_store.h).
#include "common/decision/artifact_store.h"

#include <algorithm>
#include <utility>

#include "common/decision/artifact_file.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

using Json = nlohmann::ordered_json;

std::shared_ptr<const TemperatureScaler> ArtifactSnapshot::L1(
    const std::string& key) const {
  const auto it = l1.find(key);
  return it != l1.end() ? it->second : nullptr;
}

std::optional<RoutedHead> ArtifactSnapshot::Route(
    const Question& question) const {
  const auto it = routes.find(question.key());
  return it != routes.end() ? it->second : std::nullopt;
}

ArtifactSnapshot ArtifactStore::Snapshot(const std::vector<Question>& questions,
                                         bool exact_heads) const {
  ArtifactSnapshot snapshot;
  for (const Question& question : questions) {
    snapshot.l1.emplace(question.key(), L1(question.key()));
    std::optional<RoutedHead> route = heads_.Route(question);
    if (exact_heads && route.has_value() && !route->exact) route.reset();
    snapshot.routes.emplace(question.key(), std::move(route));
  }
  return snapshot;
}

std::shared_ptr<const TemperatureScaler> ArtifactStore::L1(
    const std::string& key) const {
  absl::MutexLock lock(&mu_);
  const auto it = l1_.find(key);
  return it == l1_.end() ? nullptr : it->second;
}

void ArtifactStore::PutL1(const std::string& key,
                          std::shared_ptr<const TemperatureScaler> l1) {
  absl::MutexLock lock(&mu_);
  if (!l1_.contains(key)) l1_order_.push_back(key);
  l1_[key] = std::move(l1);
}

nlohmann::ordered_json ArtifactStore::KeepL1(
    const std::string& key, std::shared_ptr<const TemperatureScaler> l1) {
  Json entry = L1ArtifactJson(*model_, key, *l1);
  PutL1(key, std::move(l1));
  return entry;
}

nlohmann::ordered_json ArtifactStore::KeepHead(const std::string& key,
                                               HeadEntry entry) {
  const std::shared_ptr<const HeadEntry> stored =
      Versioned(*model_, key, std::move(entry));
  heads_.Put(key, stored);
  return HeadArtifactJson(*model_, key, *stored);
}

absl::Status ArtifactStore::LoadArtifact(
    const Question& question, const nlohmann::ordered_json& artifact) {
  ASSIGN_OR_RETURN(LoadedArtifacts loaded,
                   ParseArtifact(*model_, question, artifact));
  return Commit(std::move(loaded));
}

absl::StatusOr<int> ArtifactStore::Load(const nlohmann::ordered_json& file) {
  ASSIGN_OR_RETURN(LoadedArtifacts loaded, ParseArtifactsFile(*model_, file));
  const int count =
      static_cast<int>(loaded.artifacts.size() + loaded.heads.size());
  RETURN_IF_ERROR(Commit(std::move(loaded)));
  return count;
}

absl::Status ArtifactStore::Commit(LoadedArtifacts loaded) {
  // Observations first: they are the one part refused only against what the
  // store holds, and a refused load changes nothing.
  RETURN_IF_ERROR(observations_.Merge(loaded.observations));
  for (auto& [key, l1] : loaded.artifacts) PutL1(key, std::move(l1));
  for (auto& [key, entry] : loaded.heads) heads_.Put(key, std::move(entry));
  for (auto& [key, stats] : loaded.adaptation) {
    adaptation_.Set(key, std::move(stats));
  }
  return absl::OkStatus();
}

absl::Status ArtifactStore::ReplaceKey(const std::string& key,
                                       const nlohmann::ordered_json& file) {
  if (!file.is_object()) {
    return absl::InvalidArgumentError("an artifacts file is a JSON object");
  }
  const auto holds = [&](const char* part) {
    return file.contains(part) && file[part].is_object() &&
           file[part].contains(key);
  };
  const bool has_artifact = holds("artifacts");
  const bool has_head = holds("heads");
  Json part;
  if (file.contains("model")) part["model"] = file["model"];
  part["artifacts"] = Json::object();
  part["heads"] = Json::object();
  if (has_artifact) part["artifacts"][key] = file["artifacts"][key];
  if (has_head) part["heads"][key] = file["heads"][key];
  RETURN_IF_ERROR(Load(part).status());
  if (!has_artifact) {
    absl::MutexLock lock(&mu_);
    if (l1_.erase(key) > 0) {
      l1_order_.erase(std::find(l1_order_.begin(), l1_order_.end(), key));
    }
  }
  if (!has_head) heads_.Remove(key);
  return absl::OkStatus();
}

nlohmann::ordered_json ArtifactStore::Export(bool include_observations,
                                             const std::string& tenant) const {
  Json out = FileModelFields(*model_);
  Json artifacts = Json::object();
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& key : l1_order_) {
      artifacts[key] = L1ArtifactJson(*model_, key, *l1_.at(key));
    }
  }
  out["artifacts"] = std::move(artifacts);
  Json heads = Json::object();
  for (const auto& [key, entry] : heads_.All()) {
    heads[key] = HeadArtifactJson(*model_, key, *entry);
  }
  out["heads"] = std::move(heads);
  Json adaptation = Json::object();
  for (const auto& [key, stats] : adaptation_.All(tenant)) {
    if (stats.n > 0) adaptation[key] = AdaptationJson(stats);
  }
  if (!adaptation.empty()) out["adaptation"] = std::move(adaptation);
  if (include_observations) {
    Json observations = observations_.ToJson();
    if (!observations.empty()) out["observations"] = std::move(observations);
  }
  return out;
}

}  // namespace mesa_anyjev::decision
