#include "common/util/meminfo.h"

#include <fstream>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mesa_anyjev::util {

absl::StatusOr<int64_t> ParseMemAvailable(std::string_view meminfo) {
  // Debian's Abseil has its own string_view.
  const absl::string_view text(meminfo.data(), meminfo.size());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) break;
    int64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) || kib < 0 ||
        kib > std::numeric_limits<int64_t>::max() / 1024) {
      break;
    }
    return kib * 1024;
  }
  return absl::InvalidArgumentError(
      "meminfo: no \"MemAvailable: N kB\" line (Linux 3.14 and later have "
      "one)");
}

absl::StatusOr<int64_t> ReadMemAvailable(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::string text(64 << 10, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  auto bytes = ParseMemAvailable(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.status().message()));
  }
  return bytes;
}

}  // namespace mesa_anyjev::util
