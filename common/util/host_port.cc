#include "common/util/host_port.h"

#include <charconv>
#include <string>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::util {
namespace {

// Why `text` is not host:port, or "" when it is; fills host and port.
std::string Problem(std::string_view text, HostPort* out) {
  if (text.empty()) return "is empty";
  std::string_view host;
  std::string_view port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return "has '[' without ']'";
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return "has no ':port' after ']'";
    port = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return "has no ':port'";
    host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) {
      return "has an IPv6 host without brackets; write [host]:port";
    }
    port = text.substr(colon + 1);
  }
  if (host.empty()) return "has an empty host";
  for (const char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7f || c == '/' || c == '[' || c == ']') {
      return "has an invalid character in the host";
    }
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return "has a port that is not a number in 0..65535";
  }
  int number = 0;
  std::from_chars(port.data(), port.data() + port.size(), number);
  if (number > 65535) return "has a port above 65535";
  out->host = std::string(host);
  out->port = number;
  return "";
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  HostPort out;
  const std::string problem = Problem(text, &out);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(text), "' is not host:port (", problem, ")"));
  }
  return out;
}

}  // namespace mesa_anyjev::util
