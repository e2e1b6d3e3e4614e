// Whole-file reads and crash-safe writes: write a temporary name in the same
// directory, fsync, rename over the target, fsync the directory. A reader
// sees the old content or the new, never half of it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mesa_anyjev::util {

absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFileAtomic(const std::string& path, std::string_view content);

// Writes all of `content` to the open `fd` (retrying short writes and
// EINTR) and fsyncs it; errors name `path`. Does not close `fd`.
absl::Status WriteAllSynced(int fd, std::string_view content,
                            const std::string& path);

}  // namespace mesa_anyjev::util
