// What a bundle store serves (bundle_store.h): the versions its own CURRENT
// pointers name, each checked against the served model and the lock, and,
// for a question with no pointer under this lock, the version an earlier
// lock of the same model serves when its key is the question's live key.
#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bundles/bundle_store.h"
#include "common/bundles/store_layout.h"
#include "common/status/status_macros.h"
#include "common/util/files.h"

namespace mesa_anyjev::bundles {

namespace fs = std::filesystem;

std::optional<std::map<std::string, std::string>> BundleStore::LockKeys()
    const {
  auto text = util::ReadFile((fs::path(dir_) / kLockQuestions).string(),
                             {.max_bytes = options_.max_file_bytes,
                              .limit_name = options_.limit_name,
                              .follow_symlinks = false});
  if (!text.ok()) return std::nullopt;
  auto parsed = ParseJsonLimited(*text, kLockQuestions);
  if (!parsed.ok() || !parsed->is_object()) return std::nullopt;
  std::map<std::string, std::string> keys;
  for (const auto& [id, entry] : parsed->items()) {
    if (entry.is_object() && entry.contains("key") &&
        entry["key"].is_string()) {
      keys[id] = entry["key"].get<std::string>();
    }
  }
  return keys;
}

std::map<std::string, InheritedVersion> BundleStore::Inherited(
    const std::map<std::string, std::string>& live_keys) const {
  std::map<std::string, InheritedVersion> out;
  const std::string own = fs::path(dir_).filename().string();
  // Per question, the other locks' pointers, newest move first.
  std::map<std::string, std::vector<std::pair<fs::file_time_type, std::string>>>
      pointers;
  std::error_code error;
  for (const auto& entry :
       fs::directory_iterator(fs::path(dir_).parent_path(), error)) {
    const std::string lock8 = entry.path().filename().string();
    if (lock8.size() != 8 || lock8 == own || lock8[0] == '.') continue;
    for (const auto& [id, key] : live_keys) {
      std::error_code ignored;
      const fs::path pointer = entry.path() / kCurrentDir / id;
      if (!CheckQuestionId(id).ok() || !fs::is_regular_file(pointer, ignored)) {
        continue;
      }
      const auto when = fs::last_write_time(pointer, ignored);
      if (!ignored) pointers[id].emplace_back(when, lock8);
    }
  }
  for (auto& [id, found] : pointers) {
    if (Current(id).value_or(std::nullopt).has_value()) continue;
    std::sort(found.rbegin(), found.rend());
    for (const auto& [when, lock8] : found) {
      const BundleStore sibling = Sibling(lock8);
      auto current = sibling.Current(id);
      if (!current.ok() || !current->has_value()) continue;
      auto read = sibling.Get(**current);
      if (!read.ok() ||
          !CheckBinding(read->manifest, model_, lock_sha_, nullptr).ok()) {
        continue;
      }
      auto key = QuestionKey(read->version, read->manifest, id);
      if (!key.ok() || *key != live_keys.at(id)) continue;  // reworded
      out[id] = InheritedVersion{lock8,
                                 read->version,
                                 read->path,
                                 *key,
                                 std::move(read->manifest),
                                 std::move(read->artifacts)};
      break;
    }
  }
  return out;
}

absl::StatusOr<ServedSet> BundleStore::Served(
    const std::map<std::string, std::string>* live_keys) const {
  ASSIGN_OR_RETURN(const auto pointers, CurrentAll());
  std::optional<std::map<std::string, std::string>> recorded;
  if (live_keys == nullptr) {
    recorded = LockKeys();
    if (recorded.has_value()) live_keys = &*recorded;
  }
  ServedSet served;
  Json artifacts = Json::object();
  Json heads = Json::object();
  // Copies the entries of `file` under `key` into the served file.
  auto take = [&](const Json& file, const std::string& key) {
    if (file.contains("artifacts") && file["artifacts"].contains(key)) {
      artifacts[key] = file["artifacts"][key];
    }
    if (file.contains("heads") && file["heads"].contains(key)) {
      heads[key] = file["heads"][key];
    }
  };
  std::map<int, absl::StatusOr<BundleVersion>> read;
  for (const auto& [question_id, version] : pointers) {
    auto it = read.find(version);
    if (it == read.end()) it = read.emplace(version, Get(version)).first;
    absl::Status status = it->second.status();
    if (status.ok()) {
      status = CheckBinding(it->second->manifest, model_, lock_sha_, live_keys);
    }
    absl::StatusOr<std::string> key =
        status.ok() ? QuestionKey(version, it->second->manifest, question_id)
                    : absl::StatusOr<std::string>(status);
    if (!key.ok()) {
      served.refused.push_back(
          absl::StrCat(question_id, ": ", key.status().message()));
      continue;
    }
    take(it->second->artifacts, *key);
    served.versions[question_id] = version;
    served.keys[question_id] = *key;
  }
  if (live_keys != nullptr) {
    for (const auto& [id, from] : Inherited(*live_keys)) {
      take(from.artifacts, from.key);
      served.versions[id] = from.version;
      served.keys[id] = from.key;
      served.inherited[id] = from.lock;
    }
  }
  served.file["model"] = model_.model;
  served.file["artifacts"] = std::move(artifacts);
  served.file["heads"] = std::move(heads);
  return served;
}

}  // namespace mesa_anyjev::bundles
