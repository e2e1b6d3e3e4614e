#include "common/util/files.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mesa_anyjev::util {
namespace {

constexpr std::string_view kTempMark = ".tmp-";

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(std::string(what), " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const ReadLimits& limits) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer; it is refused
  // below as not a regular file.
  const int fd =
      open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK |
                             (limits.follow_symlinks ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    if (errno == ELOOP && !limits.follow_symlinks) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is a symbolic link"));
    }
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    }
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    absl::Status status = Errno("cannot stat", path);
    close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file"));
  }
  if (st.st_size > limits.max_bytes) {
    close(fd);
    return absl::OutOfRangeError(absl::StrCat(
        path, " is ", st.st_size, " bytes, over the limit of ",
        limits.max_bytes, " bytes (", std::string(limits.limit_name), ")"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = Errno("cannot read", path);
      close(fd);
      return status;
    }
    if (n == 0) break;  // shrank since fstat: keep what is there
    got += static_cast<size_t>(n);
  }
  close(fd);
  bytes.resize(got);
  return bytes;
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

absl::Status WriteNewFileSynced(const std::string& path,
                                std::string_view content, mode_t mode) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Errno("cannot create", path);
  if (absl::Status synced = WriteAllSynced(fd, content, path); !synced.ok()) {
    close(fd);
    return synced;
  }
  if (close(fd) != 0) return Errno("cannot close", path);
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory", dir);
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return Errno("cannot fsync directory", dir);
  return absl::OkStatus();
}

absl::Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                RENAME_NOREPLACE) == 0) {
    return absl::OkStatus();
  }
  if (errno == EEXIST) {
    return absl::AlreadyExistsError(absl::StrCat(to, " already exists"));
  }
  return Errno(absl::StrCat("cannot rename ", from, " to"), to);
}

absl::Status WriteFileAtomic(const std::string& path, std::string_view content,
                             mode_t mode) {
  const std::filesystem::path target(path);
  const std::filesystem::path parent =
      target.has_parent_path() ? target.parent_path() : ".";
  const std::string tmp =
      (parent / TempName(target.filename().string())).string();
  if (absl::Status written = WriteNewFileSynced(tmp, content, mode);
      !written.ok()) {
    unlink(tmp.c_str());
    return written;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status status = Errno("cannot rename onto", path);
    unlink(tmp.c_str());
    return status;
  }
  return SyncDir(parent.string());
}

std::string TempName(std::string_view stem) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  return absl::StrFormat(".%s%s%d-%016x", std::string(stem),
                         std::string(kTempMark), getpid(), random());
}

bool IsDeadWritersTemp(std::string_view name) {
  if (name.empty() || name[0] != '.') return false;
  const size_t mark = name.rfind(kTempMark);
  if (mark == std::string_view::npos) return false;
  const std::string_view rest = name.substr(mark + kTempMark.size());
  const size_t dash = rest.find('-');
  int pid = 0;
  if (dash == std::string_view::npos ||
      !absl::SimpleAtoi(std::string(rest.substr(0, dash)), &pid) || pid <= 0) {
    return false;
  }
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace mesa_anyjev::util
