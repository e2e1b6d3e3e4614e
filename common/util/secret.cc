#include "common/util/secret.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mesa_anyjev::util {

absl::StatusOr<std::optional<std::string>> LoadSecret(
    const std::string& env_name, const std::string& file,
    const std::string& what) {
  if (!env_name.empty()) {
    const char* value = std::getenv(env_name.c_str());
    if (value == nullptr || *value == '\0') {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": environment variable ", env_name, " is unset or empty"));
    }
    return std::string(absl::StripTrailingAsciiWhitespace(value));
  }
  if (file.empty()) return std::nullopt;
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot read ", file, ": ", std::strerror(errno)));
  }
  if ((info.st_mode & 077) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s has mode %04o; it must be readable by its owner only "
        "(chmod 600)",
        what, file, info.st_mode & 07777));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot open ", file));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string value(absl::StripTrailingAsciiWhitespace(buffer.str()));
  if (value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", file, " is empty"));
  }
  return value;
}

}  // namespace mesa_anyjev::util
