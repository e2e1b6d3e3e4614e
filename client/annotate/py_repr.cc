#include "client/annotate/py_repr.h"

#include <cstdio>

#include "utf8proc.h"

namespace mesa_anyjev::annotate {
namespace {

// str.isprintable() for one non-ASCII code point.
bool PyIsPrintable(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void AppendHex(std::string* out, const char* format, unsigned value) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), format, value);
  out->append(buffer);
}

}  // namespace

std::string PyStrRepr(std::string_view utf8) {
  const bool has_single = utf8.find('\'') != std::string_view::npos;
  const bool has_double = utf8.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  utf8proc_ssize_t pos = 0;
  const auto size = static_cast<utf8proc_ssize_t>(utf8.size());
  while (pos < size) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + pos, size - pos, &cp);
    if (n <= 0) {
      AppendHex(&out, "\\x%02x", bytes[pos]);
      ++pos;
      continue;
    }
    const std::string_view raw = utf8.substr(pos, n);
    pos += n;
    if (cp == quote || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out.append("\\t");
    } else if (cp == '\n') {
      out.append("\\n");
    } else if (cp == '\r') {
      out.append("\\r");
    } else if (cp < 0x20 || cp == 0x7f) {
      AppendHex(&out, "\\x%02x", static_cast<unsigned>(cp));
    } else if (cp < 0x7f || PyIsPrintable(static_cast<char32_t>(cp))) {
      out.append(raw);
    } else if (cp <= 0xff) {
      AppendHex(&out, "\\x%02x", static_cast<unsigned>(cp));
    } else if (cp <= 0xffff) {
      AppendHex(&out, "\\u%04x", static_cast<unsigned>(cp));
    } else {
      AppendHex(&out, "\\U%08x", static_cast<unsigned>(cp));
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyCountsRepr(const std::map<std::string, int>& counts) {
  std::string out = "{";
  for (const auto& [key, count] : counts) {
    if (out.size() > 1) out.append(", ");
    out.append(PyStrRepr(key)).append(": ").append(std::to_string(count));
  }
  return out + "}";
}

std::string PyStrListRepr(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out.append(", ");
    out.append(PyStrRepr(item));
  }
  return out + "]";
}

}  // namespace mesa_anyjev::annotate
