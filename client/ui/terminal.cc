#include "client/ui/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>
#include <utf8proc.h>

#include <algorithm>

namespace mesa_anyjev::client::ui {
namespace {

// The next code point of `text` at `*at` and its cells; a byte that does not
// start a valid sequence is one cell.
int NextCells(std::string_view text, size_t* at) {
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n = utf8proc_iterate(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data() + *at),
      static_cast<utf8proc_ssize_t>(text.size() - *at), &cp);
  if (n <= 0) {
    ++*at;
    return 1;
  }
  *at += static_cast<size_t>(n);
  return std::max(0, utf8proc_charwidth(cp));
}

}  // namespace

void PrintJson(const nlohmann::ordered_json& doc, std::ostream& out) {
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
      << "\n";
}

void PrintJson(const nlohmann::json& doc, std::ostream& out) {
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
      << "\n";
}

bool StdoutIsTty() { return isatty(STDOUT_FILENO) != 0; }
bool StderrIsTty() { return isatty(STDERR_FILENO) != 0; }

int OutputColumns() {
  constexpr int kMax = 100;
  winsize size{};
  if (StdoutIsTty() && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col > 0) {
    return std::min<int>(kMax, size.ws_col);
  }
  return kMax;
}

int DisplayWidth(std::string_view text) {
  int cells = 0;
  for (size_t at = 0; at < text.size();) cells += NextCells(text, &at);
  return cells;
}

std::string ShellQuoted(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !word.empty() && word.find_first_not_of(
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
                             "vwxyz0123456789_./:=@%+,-") == std::string::npos;
    if (plain) {
      out += word;
      continue;
    }
    out += '\'';
    for (const char c : word) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

std::string FitCells(std::string_view text, int cells) {
  if (DisplayWidth(text) <= cells) return std::string(text);
  const int keep = std::max(0, cells - 3);
  int used = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t next = at;
    const int w = NextCells(text, &next);
    if (used + w > keep) break;
    used += w;
    at = next;
  }
  return std::string(text.substr(0, at)) + std::string(std::min(3, cells), '.');
}

}  // namespace mesa_anyjev::client::ui
