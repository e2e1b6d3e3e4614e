#include "common/util/host_port.h"

#include <charconv>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::util {

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(text), "' is not host:port (", std::string(why), ")"));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no ':port'");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("write IPv6 addresses as [addr]:port");
  }
  if (host.empty()) return bad("empty host");
  int port = -1;
  const auto [end, ec] = std::from_chars(
      port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() ||
      end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return bad("port must be an integer in [0, 65535]");
  }
  return HostPort{std::string(host), port};
}

}  // namespace mesa_anyjev::util
