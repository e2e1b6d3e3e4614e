#include "common/config/set_flag.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::config {

absl::StatusOr<Override> ParseSetFlag(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: flag --set '", std::string(text),
                     "': expected section.field=value"));
  }
  const std::string key(text.substr(0, eq));
  return Override{key, std::string(text.substr(eq + 1)),
                  absl::StrCat("flag --set ", key)};
}

}  // namespace mesa_anyjev::config
