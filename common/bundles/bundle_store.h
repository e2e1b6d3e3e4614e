// BundleStore: immutable, numbered bundle versions of one model under one
// questions lock, and a CURRENT pointer per question (docs/bundles.md).
//
//   <root>/<model_slug>/<lock_sha[:8]>/
//     v<N>/artifacts.json     heads/export file {"model", "artifacts", "heads"}
//     v<N>/observations.json  optional
//     v<N>/manifest.json      model, model_identity, questions_lock_sha,
//                             version, per_question, validation, created,
//                             files {name: sha256}, + the fitter's extra
//     current/<question_id>   "v<N>\n" then the earlier CURRENTs, newest
//                             first (the rollback history), one per line
//     questions.json          the lock's questions {qid: {kind, text,
//                             options, key, twin}}, as clients recorded it
//     agreements/             bench compare's records (agreement_record.h)
//
// Across locks: a question with no CURRENT under this lock is served by
// the CURRENT of an earlier lock of the same model whose version holds the
// question's live key (the question unchanged: the key says so); the one
// whose pointer moved last wins. Promote and Rollback act on this lock's
// pointers only.
//
// A version is written into a temporary directory, every file and the
// directory fsynced, renamed to v<N> (never over an existing one), and the
// parent fsynced; a pointer is replaced by write-temp + fsync + rename. So
// a crash at any point leaves whole versions and pointers that name whole
// versions; dead writers' temporaries are removed by Open and never read.
//
//   auto store = BundleStore::Open(root, {"fake", identity}, lock_sha);
//   int n = *store->Put(export_file, {{"per_question", ...}, ...});
//   store->Promote(n, "term.fits", /*force=*/false);
//   ServedSet served = *store->Served();  // load served.file into a Decider
//
// Mutations take an exclusive flock on <lockdir>/.lock, so several processes
// (a daemon and a CLI) may share one store.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/bundles/bundle_manifest.h"

namespace mesa_anyjev::bundles {

struct StoreOptions {
  // Largest artifacts.json, observations.json or manifest.json accepted by
  // Put or read back; larger is INVALID_ARGUMENT (Put) or OUT_OF_RANGE.
  int64_t max_file_bytes = 8 << 20;
  std::string limit_name = "limits.max_bundle_bytes";  // named in messages
};

// One version as read back, every file's sha256 verified.
struct BundleVersion {
  int version = 0;
  std::string path;
  Json manifest;
  Json artifacts;  // artifacts.json
};

// A version's manifest without verifying its files (listings).
struct VersionEntry {
  int version = 0;
  std::string path;
  absl::StatusOr<Json> manifest;
};

struct PointerMove {
  int version = 0;              // CURRENT after the move
  std::optional<int> previous;  // CURRENT before it
};

// What a decider should serve: per question its CURRENT version and key,
// and one heads/export file holding, for every served key, the artifact and
// head of that version (and nothing else).
struct ServedSet {
  std::map<std::string, int> versions;      // question id -> version
  std::map<std::string, std::string> keys;  // question id -> key
  Json file;
  // "<question_id>: <why>" for pointers that could not be served (a version
  // that fails verification or binding); those questions are left out.
  std::vector<std::string> refused;
  // question id -> lock_sha[:8] of the earlier lock whose CURRENT serves it
  // (versions[id] is that lock's version).
  std::map<std::string, std::string> inherited;
};

// A question's CURRENT under an earlier lock that serves it under this one.
struct InheritedVersion {
  std::string lock;  // lock_sha[:8] of the lock directory it is from
  int version = 0;
  std::string path;
  std::string key;
  Json manifest;
  Json artifacts;
};

// <root (~ expanded)>/<model_slug>/<lock_sha[:8]>: where Open keeps a
// model's versions for one lock (it may not exist yet).
std::string LockDirOf(const std::string& root, const std::string& model,
                      const std::string& lock_sha);

class BundleStore {
 public:
  // Creates <root>/<model_slug>/<lock_sha[:8]>/ when missing and removes
  // dead writers' temporaries. `lock_sha` is the questions lock's sha256
  // hex (at least 8 characters). A leading "~/" in root is the home.
  static absl::StatusOr<std::unique_ptr<BundleStore>> Open(
      const std::string& root, ModelBinding model, const std::string& lock_sha,
      StoreOptions options = {});

  // The lock directory name (lock_sha[:8]) under <root>/<model_slug> whose
  // CURRENT pointers moved last (a move renames into current/ and so
  // updates its mtime); "" when no pointer exists.
  static std::string LastMovedLock(const std::string& root,
                                   const std::string& model);

  const std::string& dir() const { return dir_; }
  const ModelBinding& model() const { return model_; }
  const std::string& lock_sha() const { return lock_sha_; }

  // OK when a new version could be written now (a temporary directory is
  // made and removed); else PERMISSION_DENIED naming the directory, so a
  // fit can be refused before it runs rather than discarded after.
  absl::Status CheckWritable() const;

  // Version numbers present, ascending (directories named v<N>).
  absl::StatusOr<std::vector<int>> Versions() const;
  // Every version's manifest, ascending; unreadable ones carry the error.
  absl::StatusOr<std::vector<VersionEntry>> List() const;

  // Writes a new version N = last + 1 and returns N. `artifacts` is a
  // heads/export file of this model; a version adopted from another model
  // (`adopted_from` {model, model_identity, ...} in the manifest, artifacts
  // rebound to this model) needs a record under agreements/ in which the
  // two agree on every question it holds (FAILED_PRECONDITION naming why
  // not). `manifest_extra` must carry
  // per_question {qid: {key, level, ...}} whose keys artifacts.json holds,
  // and may carry validation {qid: {loco: {acc, ece, ...}, ...}}, fitted_on
  // and anything else. The store sets model, model_identity,
  // questions_lock_sha, version, created and files. INVALID_ARGUMENT for a
  // malformed input or a file over the limit (naming it); FAILED_PRECONDITION
  // for a bundle of another model, identity or lock.
  absl::StatusOr<int> Put(const Json& artifacts, const Json& manifest_extra,
                          const Json* observations = nullptr);

  // Version N read back: NOT_FOUND "no version v<N> under <dir>", DATA_LOSS
  // naming the file whose sha256 (or presence) does not match the manifest.
  absl::StatusOr<BundleVersion> Get(int version) const;

  // The question's CURRENT version, if it has one.
  absl::StatusOr<std::optional<int>> Current(
      const std::string& question_id) const;
  // Every question's CURRENT version.
  absl::StatusOr<std::map<std::string, int>> CurrentAll() const;

  // Moves the question's CURRENT to N after Get(N) verifies, the binding
  // holds and N has an artifact for the question; unless `force`, the
  // promote gate must pass (FAILED_PRECONDITION with its message).
  absl::StatusOr<PointerMove> Promote(int version,
                                      const std::string& question_id,
                                      bool force);
  // Moves the question's CURRENT back to the one before it (which must
  // still verify); FAILED_PRECONDITION when there is none.
  absl::StatusOr<PointerMove> Rollback(const std::string& question_id);

  // What to serve now. `live_keys` (question id -> key of the caller's
  // question set; without it, the keys of questions.json when recorded)
  // refuses versions whose keys went stale under another lock (a version
  // whose keys all live is served whatever its lock) and lets a question
  // with no CURRENT here inherit an earlier lock's (see the top).
  absl::StatusOr<ServedSet> Served(
      const std::map<std::string, std::string>* live_keys = nullptr) const;

  // For each live question with no CURRENT under this lock, the earlier
  // lock's CURRENT that serves it: the newest-moved pointer whose version
  // verifies, is bound to this model and holds the live key. Versions that
  // fail are skipped.
  std::map<std::string, InheritedVersion> Inherited(
      const std::map<std::string, std::string>& live_keys) const;

  // Records the lock's "questions" mapping in questions.json when it is not
  // there yet (the caller checked that it hashes to the lock's sha).
  absl::Status KeepLockQuestions(const Json& questions);
  // {question id: key} of questions.json; nullopt when none is recorded.
  std::optional<std::map<std::string, std::string>> LockKeys() const;

 private:
  BundleStore(std::string dir, ModelBinding model, std::string lock_sha,
              StoreOptions options);

  // Another lock directory of the same model, for reading.
  BundleStore Sibling(const std::string& lock8) const;

  std::string VersionDir(int version) const;
  std::string PointerPath(const std::string& question_id) const;
  absl::StatusOr<std::vector<int>> History(
      const std::string& question_id) const;
  absl::Status WriteHistory(const std::string& question_id,
                            const std::vector<int>& history);
  absl::Status CheckServable(const BundleVersion& version) const;

  const std::string dir_;
  const ModelBinding model_;
  const std::string lock_sha_;
  const StoreOptions options_;
};

}  // namespace mesa_anyjev::bundles
