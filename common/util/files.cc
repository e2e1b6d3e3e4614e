#include "common/util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::util {
namespace {

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(std::string(what), " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::Status WriteAllSynced(int fd, std::string_view content,
                            const std::string& path) {
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n =
        write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return Errno("cannot fsync", path);
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path,
                             std::string_view content) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : ".";
  std::string tmp =
      (dir / absl::StrCat(".", target.filename().string(), ".tmp.XXXXXX"))
          .string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return Errno("cannot create a temporary file beside", path);
  absl::Status synced = fchmod(fd, 0644) == 0 ? WriteAllSynced(fd, content, tmp)
                                              : Errno("cannot chmod", tmp);
  close(fd);
  if (!synced.ok()) {
    unlink(tmp.c_str());
    return synced;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Errno("cannot rename onto", path);
  }
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::util
