#include "common/bundles/bundle_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/bundles/agreement_record.h"
#include "common/bundles/store_layout.h"
#include "common/status/status_macros.h"
#include "common/text/json_numbers.h"
#include "common/util/files.h"
#include "common/util/hash.h"

namespace mesa_anyjev::bundles {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxHistory = 64;

// Manifest fields only the store writes.
constexpr const char* kStoreFields[] = {"version", "created", "files"};

// "v<N>" with N >= 1, nothing else.
std::optional<int> ParseVersionName(std::string_view name) {
  if (name.size() < 2 || name[0] != 'v' || name[1] == '0') return std::nullopt;
  int n = 0;
  for (const char c : name.substr(1)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  if (!absl::SimpleAtoi(std::string(name.substr(1)), &n) || n <= 0)
    return std::nullopt;
  return n;
}

std::string ExpandHome(const std::string& path) {
  if (path != "~" && !path.starts_with("~/")) return path;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home == nullptr ? "" : home, path.substr(1));
}

}  // namespace

std::string LockDirOf(const std::string& root, const std::string& model,
                      const std::string& lock_sha) {
  return (fs::path(ExpandHome(root)) / ModelSlug(model) / lock_sha.substr(0, 8))
      .string();
}

namespace {

// An exclusive flock on <dir>/.lock for the life of the object; the kernel
// drops it when the holder dies, so a killed writer never wedges the store.
class StoreLock {
 public:
  static absl::StatusOr<StoreLock> Take(const std::string& dir) {
    const std::string path = (fs::path(dir) / ".lock").string();
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", path));
    }
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        close(fd);
        return absl::InternalError(absl::StrCat("cannot lock ", path));
      }
    }
    return StoreLock(fd);
  }
  StoreLock(StoreLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  StoreLock& operator=(StoreLock&&) = delete;
  ~StoreLock() {
    if (fd_ >= 0) close(fd_);  // releases the flock
  }

 private:
  explicit StoreLock(int fd) : fd_(fd) {}
  int fd_;
};

absl::Status MakeDirs(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

// Removes dead writers' temporaries directly under `dir`.
void RemoveDeadTemps(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (util::IsDeadWritersTemp(entry.path().filename().string())) {
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
}

absl::StatusOr<std::string> Dump(const Json& value, const std::string& name,
                                 const StoreOptions& options) {
  std::string text;
  try {
    text = value.dump(1) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": cannot be written as JSON: ", e.what()));
  }
  if (static_cast<int64_t>(text.size()) > options.max_file_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", text.size(), " bytes exceed the limit of ",
        options.max_file_bytes, " bytes (", options.limit_name, ")"));
  }
  return text;
}

// A version adopted from another model: every question it holds must be
// agreed on by a current record of the two in this lock's agreements/.
absl::Status CheckAdoption(const Json& extra, const std::string& dir,
                           const ModelBinding& model,
                           const std::string& lock_sha) {
  const Json& from = extra["adopted_from"];
  if (!from.is_object() || !from.contains("model") ||
      !from["model"].is_string() || !from.contains("model_identity") ||
      !from["model_identity"].is_string()) {
    return absl::InvalidArgumentError(
        "manifest.adopted_from: {model, model_identity, ...} required");
  }
  const ModelBinding other{from["model"].get<std::string>(),
                           from["model_identity"].get<std::string>()};
  const std::vector<StoredAgreement> records = ListAgreements(dir);
  for (const auto& [id, entry] : extra["per_question"].items()) {
    const AgreementLookup found =
        FindAgreement(records, model, other, lock_sha, id,
                      entry["key"].get<std::string>(), nullptr);
    if (!found.record.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("a version adopted from '", other.model, "' for ", id,
                       " needs a current agreement record: ", found.why_not));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPutInput(const Json& artifacts, const Json& extra,
                           const Json* observations, const ModelBinding& model,
                           const std::string& lock_sha,
                           const std::string& dir) {
  if (!artifacts.is_object()) {
    return absl::InvalidArgumentError("artifacts: must be a JSON object");
  }
  if (artifacts.contains("model") && artifacts["model"] != model.model) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifacts.model ", artifacts["model"].dump(),
                     " is not the serving model '", model.model, "'"));
  }
  for (const char* part : {"artifacts", "heads"}) {
    if (artifacts.contains(part) && !artifacts[part].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifacts.", part, ": must be a JSON object"));
    }
  }
  if (observations != nullptr && !observations->is_object()) {
    return absl::InvalidArgumentError("observations: must be a JSON object");
  }
  if (!extra.is_object()) {
    return absl::InvalidArgumentError("manifest: must be a JSON object");
  }
  for (const char* field : kStoreFields) {
    if (extra.contains(field)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "manifest.", field, ": set by the store, not the caller"));
    }
  }
  // A manifest may restate the binding; one that contradicts it is a bundle
  // for another model, identity or lock.
  Json bound = extra;
  if (!bound.contains("model")) bound["model"] = model.model;
  RETURN_IF_ERROR(CheckBinding(bound, model, lock_sha, nullptr));
  if (extra.contains("questions_lock_sha") &&
      extra["questions_lock_sha"] != lock_sha) {
    return absl::FailedPreconditionError(absl::StrCat(
        "manifest.questions_lock_sha ", extra["questions_lock_sha"].dump(),
        " is not the store's lock ", lock_sha));
  }
  if (!extra.contains("per_question") || !extra["per_question"].is_object() ||
      extra["per_question"].empty()) {
    return absl::InvalidArgumentError(
        "manifest.per_question: required, {question_id: {key, level, ...}}");
  }
  for (const auto& [id, entry] : extra["per_question"].items()) {
    RETURN_IF_ERROR(CheckQuestionId(id));
    if (!entry.is_object() || !entry.contains("key") ||
        !entry["key"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest.per_question.", id, ".key: required string"));
    }
    const std::string key = entry["key"].get<std::string>();
    const bool held =
        (artifacts.contains("artifacts") &&
         artifacts["artifacts"].contains(key)) ||
        (artifacts.contains("heads") && artifacts["heads"].contains(key));
    if (!held) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest.per_question.", id, ".key ", key,
                       ": artifacts.json has no artifact or head under it"));
    }
  }
  if (extra.contains("adopted_from")) {
    RETURN_IF_ERROR(CheckAdoption(extra, dir, model, lock_sha));
  }
  if (extra.contains("validation")) {
    if (!extra["validation"].is_object()) {
      return absl::InvalidArgumentError(
          "manifest.validation: must be {question_id: {loco: {acc, ece}}}");
    }
    for (const auto& [id, v] : extra["validation"].items()) {
      if (v.is_object() && v.contains("loco") && !v["loco"].is_null() &&
          !LocoOf(extra, id).has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "manifest.validation.", id, ".loco: needs numbers acc and ece"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

BundleStore::BundleStore(std::string dir, ModelBinding model,
                         std::string lock_sha, StoreOptions options)
    : dir_(std::move(dir)),
      model_(std::move(model)),
      lock_sha_(std::move(lock_sha)),
      options_(std::move(options)) {}

BundleStore BundleStore::Sibling(const std::string& lock8) const {
  return BundleStore((fs::path(dir_).parent_path() / lock8).string(), model_,
                     lock8, options_);
}

absl::StatusOr<std::unique_ptr<BundleStore>> BundleStore::Open(
    const std::string& root, ModelBinding model, const std::string& lock_sha,
    StoreOptions options) {
  if (root.empty()) return absl::InvalidArgumentError("bundle root is empty");
  if (model.model.empty()) {
    return absl::InvalidArgumentError("bundle store: empty model id");
  }
  bool hex = lock_sha.size() >= 8 && lock_sha.size() <= 64;
  for (const char c : lock_sha) {
    hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (!hex) {
    return absl::InvalidArgumentError(
        absl::StrCat("lock_sha '", lock_sha.substr(0, 80),
                     "': 8..64 lower-case hex characters"));
  }
  const std::string dir = (fs::path(ExpandHome(root)) / ModelSlug(model.model) /
                           lock_sha.substr(0, 8))
                              .string();
  RETURN_IF_ERROR(MakeDirs((fs::path(dir) / kCurrentDir).string()));
  RemoveDeadTemps(dir);
  RemoveDeadTemps((fs::path(dir) / kCurrentDir).string());
  return std::unique_ptr<BundleStore>(
      new BundleStore(dir, std::move(model), lock_sha, std::move(options)));
}

absl::Status BundleStore::CheckWritable() const {
  const fs::path probe = fs::path(dir_) / util::TempName("write-check");
  std::error_code error;
  if (!fs::create_directory(probe, error) || error) {
    return absl::PermissionDeniedError(
        absl::StrCat("the bundle store ", dir_, " is not writable: ",
                     error ? error.message() : "cannot create a directory"));
  }
  fs::remove(probe, error);
  return absl::OkStatus();
}

std::string BundleStore::LastMovedLock(const std::string& root,
                                       const std::string& model) {
  std::string best;
  fs::file_time_type best_time;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(
           fs::path(ExpandHome(root)) / ModelSlug(model), error)) {
    const std::string name = entry.path().filename().string();
    const fs::path current = entry.path() / kCurrentDir;
    std::error_code ignored;
    if (name.size() != 8 || name[0] == '.' ||
        !fs::is_directory(current, ignored) || fs::is_empty(current, ignored)) {
      continue;
    }
    const fs::file_time_type when = fs::last_write_time(current, ignored);
    if (!ignored && (best.empty() || when > best_time)) {
      best = name;
      best_time = when;
    }
  }
  return best;
}

std::string BundleStore::VersionDir(int version) const {
  return (fs::path(dir_) / absl::StrCat("v", version)).string();
}

std::string BundleStore::PointerPath(const std::string& question_id) const {
  return (fs::path(dir_) / kCurrentDir / question_id).string();
}

absl::StatusOr<std::vector<int>> BundleStore::Versions() const {
  std::vector<int> versions;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir_, error)) {
    const auto n = ParseVersionName(entry.path().filename().string());
    if (n.has_value() && entry.is_directory()) versions.push_back(*n);
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot list ", dir_, ": ", error.message()));
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

absl::StatusOr<std::vector<VersionEntry>> BundleStore::List() const {
  ASSIGN_OR_RETURN(const std::vector<int> versions, Versions());
  std::vector<VersionEntry> out;
  for (const int n : versions) {
    VersionEntry entry{n, VersionDir(n), absl::UnknownError("")};
    auto bytes = util::ReadFile((fs::path(entry.path) / kManifest).string(),
                                {.max_bytes = options_.max_file_bytes,
                                 .limit_name = options_.limit_name,
                                 .follow_symlinks = false});
    entry.manifest = bytes.ok() ? ParseJsonLimited(*bytes, kManifest)
                                : absl::StatusOr<Json>(bytes.status());
    out.push_back(std::move(entry));
  }
  return out;
}

absl::StatusOr<int> BundleStore::Put(const Json& artifacts,
                                     const Json& manifest_extra,
                                     const Json* observations) {
  RETURN_IF_ERROR(CheckPutInput(artifacts, manifest_extra, observations, model_,
                                lock_sha_, dir_));
  std::vector<std::pair<std::string, std::string>> files;
  ASSIGN_OR_RETURN(std::string artifacts_text,
                   Dump(artifacts, kArtifacts, options_));
  files.emplace_back(kArtifacts, std::move(artifacts_text));
  if (observations != nullptr) {
    ASSIGN_OR_RETURN(std::string text,
                     Dump(*observations, kObservations, options_));
    files.emplace_back(kObservations, std::move(text));
  }

  ASSIGN_OR_RETURN(StoreLock lock, StoreLock::Take(dir_));
  ASSIGN_OR_RETURN(const std::vector<int> versions, Versions());
  const int version = versions.empty() ? 1 : versions.back() + 1;

  Json manifest;
  manifest["model"] = model_.model;
  manifest["model_identity"] = model_.identity;
  manifest["questions_lock_sha"] = lock_sha_;
  manifest["version"] = version;
  manifest["created"] =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  for (const auto& [key, value] : manifest_extra.items()) {
    if (!manifest.contains(key)) manifest[key] = value;
  }
  Json sums = Json::object();
  for (const auto& [name, text] : files) sums[name] = util::Sha256Hex(text);
  manifest["files"] = std::move(sums);
  ASSIGN_OR_RETURN(std::string manifest_text,
                   Dump(manifest, kManifest, options_));
  files.emplace_back(kManifest, std::move(manifest_text));

  const std::string tmp =
      (fs::path(dir_) / util::TempName(absl::StrCat("v", version))).string();
  auto write_all = [&]() -> absl::Status {
    RETURN_IF_ERROR(MakeDirs(tmp));
    for (const auto& [name, text] : files) {
      RETURN_IF_ERROR(
          util::WriteNewFileSynced((fs::path(tmp) / name).string(), text));
    }
    RETURN_IF_ERROR(util::SyncDir(tmp));
    RETURN_IF_ERROR(util::RenameNoReplace(tmp, VersionDir(version)));
    return util::SyncDir(dir_);
  };
  if (absl::Status written = write_all(); !written.ok()) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    if (absl::IsAlreadyExists(written)) {
      return absl::AbortedError(absl::StrCat(
          "v", version, " appeared under ", dir_,
          " while it was being written (a writer outside the store lock); "
          "retry"));
    }
    return written;
  }
  return version;
}

absl::StatusOr<BundleVersion> BundleStore::Get(int version) const {
  const std::string path = VersionDir(version);
  std::error_code error;
  if (version <= 0 || !fs::is_directory(path, error)) {
    return absl::NotFoundError(
        absl::StrCat("no version v", version, " under ", dir_));
  }
  const std::string where = absl::StrCat("v", version, "/");
  auto read = [&](const std::string& name) -> absl::StatusOr<std::string> {
    auto bytes = util::ReadFile((fs::path(path) / name).string(),
                                {.max_bytes = options_.max_file_bytes,
                                 .limit_name = options_.limit_name,
                                 .follow_symlinks = false});
    if (absl::IsNotFound(bytes.status())) {
      return absl::DataLossError(absl::StrCat(where, name, " is missing"));
    }
    return bytes;
  };
  ASSIGN_OR_RETURN(const std::string manifest_text, read(kManifest));
  auto manifest = ParseJsonLimited(manifest_text, where + kManifest);
  if (!manifest.ok()) {
    return absl::DataLossError(std::string(manifest.status().message()));
  }
  if (!manifest->is_object() || !manifest->contains("files") ||
      !(*manifest)["files"].is_object() ||
      !(*manifest)["files"].contains(kArtifacts) ||
      !(*manifest).contains("version") ||
      !text::JsonInteger((*manifest)["version"], "version", version, version)
           .ok()) {
    return absl::DataLossError(
        absl::StrCat(where, kManifest, ": not a manifest of v", version,
                     " (needs version and files with ", kArtifacts, ")"));
  }
  std::string artifacts_text;
  for (const auto& [name, sum] : (*manifest)["files"].items()) {
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' ||
        !sum.is_string()) {
      return absl::DataLossError(
          absl::StrCat(where, kManifest, ": bad files entry '", name, "'"));
    }
    ASSIGN_OR_RETURN(std::string bytes, read(name));
    const std::string got = util::Sha256Hex(bytes);
    if (got != sum.get<std::string>()) {
      return absl::DataLossError(
          absl::StrCat(where, name, ": sha256 ", got, " does not match the ",
                       "manifest's ", sum.get<std::string>()));
    }
    if (name == kArtifacts) artifacts_text = std::move(bytes);
  }
  auto artifacts = ParseJsonLimited(artifacts_text, where + kArtifacts);
  if (!artifacts.ok()) {
    return absl::DataLossError(std::string(artifacts.status().message()));
  }
  return BundleVersion{version, path, *std::move(manifest),
                       *std::move(artifacts)};
}

absl::StatusOr<std::vector<int>> BundleStore::History(
    const std::string& question_id) const {
  RETURN_IF_ERROR(CheckQuestionId(question_id));
  auto text =
      util::ReadFile(PointerPath(question_id), {.max_bytes = 1 << 16,
                                                .limit_name = "pointer size",
                                                .follow_symlinks = false});
  if (absl::IsNotFound(text.status())) return std::vector<int>{};
  if (!text.ok()) return text.status();
  std::vector<int> history;
  for (const absl::string_view piece :
       absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    const std::string line(piece);
    const auto n = ParseVersionName(line);
    if (!n.has_value()) {
      return absl::DataLossError(absl::StrCat("CURRENT pointer of ",
                                              question_id, " has a bad line '",
                                              line.substr(0, 40), "'"));
    }
    history.push_back(*n);
  }
  return history;
}

absl::Status BundleStore::WriteHistory(const std::string& question_id,
                                       const std::vector<int>& history) {
  std::string text;
  for (size_t i = 0; i < history.size() && i < kMaxHistory; ++i) {
    absl::StrAppend(&text, "v", history[i], "\n");
  }
  return util::WriteFileAtomic(PointerPath(question_id), text);
}

absl::StatusOr<std::optional<int>> BundleStore::Current(
    const std::string& question_id) const {
  ASSIGN_OR_RETURN(const std::vector<int> history, History(question_id));
  if (history.empty()) return std::optional<int>();
  return std::optional<int>(history.front());
}

absl::StatusOr<std::map<std::string, int>> BundleStore::CurrentAll() const {
  std::map<std::string, int> out;
  std::error_code error;
  for (const auto& entry :
       fs::directory_iterator(fs::path(dir_) / kCurrentDir, error)) {
    const std::string name = entry.path().filename().string();
    if (!CheckQuestionId(name).ok() || !entry.is_regular_file()) continue;
    ASSIGN_OR_RETURN(const std::optional<int> current, Current(name));
    if (current.has_value()) out[name] = *current;
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot list ", dir_, "/current: ", error.message()));
  }
  return out;
}

absl::Status BundleStore::CheckServable(const BundleVersion& version) const {
  absl::Status bound =
      CheckBinding(version.manifest, model_, lock_sha_, nullptr);
  if (bound.ok()) return bound;
  return absl::Status(
      bound.code(), absl::StrCat("v", version.version, ": ", bound.message()));
}

absl::StatusOr<PointerMove> BundleStore::Promote(int version,
                                                 const std::string& question_id,
                                                 bool force) {
  RETURN_IF_ERROR(CheckQuestionId(question_id));
  ASSIGN_OR_RETURN(StoreLock lock, StoreLock::Take(dir_));
  ASSIGN_OR_RETURN(const BundleVersion fresh, Get(version));
  RETURN_IF_ERROR(CheckServable(fresh));
  RETURN_IF_ERROR(QuestionKey(version, fresh.manifest, question_id).status());
  ASSIGN_OR_RETURN(std::vector<int> history, History(question_id));
  std::optional<int> previous;
  if (!history.empty()) previous = history.front();
  if (!force) {
    std::optional<BundleVersion> old;
    if (previous.has_value() && *previous != version) {
      auto read = Get(*previous);
      // A current version that no longer verifies has no figures to defend.
      if (read.ok()) old = *std::move(read);
    }
    RETURN_IF_ERROR(PromoteGate(version, fresh.manifest, previous,
                                old.has_value() ? &old->manifest : nullptr,
                                question_id));
  }
  if (previous == version) return PointerMove{version, previous};
  history.insert(history.begin(), version);
  RETURN_IF_ERROR(WriteHistory(question_id, history));
  return PointerMove{version, previous};
}

absl::StatusOr<PointerMove> BundleStore::Rollback(
    const std::string& question_id) {
  RETURN_IF_ERROR(CheckQuestionId(question_id));
  ASSIGN_OR_RETURN(StoreLock lock, StoreLock::Take(dir_));
  ASSIGN_OR_RETURN(std::vector<int> history, History(question_id));
  if (history.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "question ", question_id, " has no CURRENT version under lock ",
        lock_sha_.substr(0, 8),
        " (an inherited one is rolled back under its own lock)"));
  }
  if (history.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("question ", question_id, " has no earlier CURRENT than v",
                     history.front(), " to roll back to"));
  }
  ASSIGN_OR_RETURN(const BundleVersion target, Get(history[1]));
  RETURN_IF_ERROR(CheckServable(target));
  const int previous = history.front();
  history.erase(history.begin());
  RETURN_IF_ERROR(WriteHistory(question_id, history));
  return PointerMove{history.front(), previous};
}

absl::Status BundleStore::KeepLockQuestions(const Json& questions) {
  if (!questions.is_object()) {
    return absl::InvalidArgumentError(
        "questions_json: the lock's \"questions\" mapping, a JSON object");
  }
  const std::string path = (fs::path(dir_) / kLockQuestions).string();
  std::error_code error;
  if (fs::exists(path, error)) return absl::OkStatus();
  ASSIGN_OR_RETURN(StoreLock lock, StoreLock::Take(dir_));
  if (fs::exists(path, error)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string text,
                   Dump(questions, kLockQuestions, options_));
  return util::WriteFileAtomic(path, text);
}

}  // namespace mesa_anyjev::bundles
