// The file operations the bundle store is built from, each durable before it
// returns: files are fsynced before they are renamed and the directory that
// holds a new name is fsynced after, so a crash (or SIGKILL, or power loss)
// leaves either the old name or the whole new one (reliability-anchors.md
// 3.5). Temporary names carry the writer's pid so a later Open can tell a
// dead writer's leftovers from a live writer's work in progress.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mesa_anyjev::bundles {

// A fresh temporary name for a writer in this process:
// ".<stem>.tmp-<pid>-<random hex>".
std::string TempName(std::string_view stem);

// True for names TempName makes whose writer process no longer exists.
bool IsDeadWritersTemp(std::string_view name);

// Creates `path` (it must not exist), writes `content`, fsyncs and closes.
absl::Status WriteNewFileSynced(const std::string& path,
                                std::string_view content);

// fsync of a directory, so the names created or renamed in it persist.
absl::Status SyncDir(const std::string& dir);

// rename(2) that refuses an existing target (renameat2 RENAME_NOREPLACE):
// ALREADY_EXISTS when `to` exists, then nothing changed.
absl::Status RenameNoReplace(const std::string& from, const std::string& to);

// Replaces (or creates) the file `path` with `content`: a temporary beside
// it, fsync, rename over `path`, fsync of the directory.
absl::Status ReplaceFileAtomic(const std::string& path,
                               std::string_view content);

// Reads at most `max_bytes` of `path`; OUT_OF_RANGE naming `what` and the
// limit when the file is larger (checked before reading), NOT_FOUND when it
// does not exist.
absl::StatusOr<std::string> ReadCapped(const std::string& path,
                                       int64_t max_bytes,
                                       std::string_view limit_name);

}  // namespace mesa_anyjev::bundles
