// The one place for file reads and durable writes. Reads are bounded and
// refuse anything but a regular file before reading. Writes are durable
// before they return: files are fsynced before they are renamed and the
// directory that holds a new name is fsynced after, so a crash (or SIGKILL,
// or power loss) leaves either the old name or the whole new one
// (docs/bundles.md). Temporary names carry the writer's pid so a
// later reader can tell a dead writer's leftovers from a live writer's work
// in progress.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mesa_anyjev::util {

struct ReadLimits {
  int64_t max_bytes = int64_t{256} << 20;
  std::string_view limit_name = "the 256 MiB file cap";
  // false: a symbolic link is refused (FAILED_PRECONDITION), so a link
  // planted in a store cannot point it at a file outside.
  bool follow_symlinks = true;
};

// The whole of `path`: NOT_FOUND when it does not exist,
// FAILED_PRECONDITION when it is not a regular file, OUT_OF_RANGE naming
// the limit when it is larger (checked before reading).
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const ReadLimits& limits = {});

// Replaces (or creates) the file `path` with `content`: a temporary beside
// it (created with `mode`, less the umask), fsync, rename over `path`, fsync
// of the directory (a failure of any step is returned; the old content is
// then still in place).
absl::Status WriteFileAtomic(const std::string& path, std::string_view content,
                             mode_t mode = 0644);

// Writes all of `content` to the open `fd` (retrying short writes and
// EINTR) and fsyncs it; errors name `path`. Does not close `fd`.
absl::Status WriteAllSynced(int fd, std::string_view content,
                            const std::string& path);

// Creates `path` (it must not exist) with `mode`, writes `content`, fsyncs
// and closes.
absl::Status WriteNewFileSynced(const std::string& path,
                                std::string_view content, mode_t mode = 0644);

// fsync of a directory, so the names created or renamed in it persist.
absl::Status SyncDir(const std::string& dir);

// rename(2) that refuses an existing target (renameat2 RENAME_NOREPLACE):
// ALREADY_EXISTS when `to` exists, then nothing changed.
absl::Status RenameNoReplace(const std::string& from, const std::string& to);

// A fresh temporary name for a writer in this process:
// ".<stem>.tmp-<pid>-<random hex>".
std::string TempName(std::string_view stem);

// True for names TempName makes whose writer process no longer exists.
bool IsDeadWritersTemp(std::string_view name);

}  // namespace mesa_anyjev::util
