// Python str semantics (see py_text.h).
#include "common/text/py_text.h"

#include <limits>

#include "common/text/utf8.h"
#include "utf8proc.h"

namespace mesa_anyjev::text {
namespace {

// Appends `cp`, or the raw byte it stands for (see DecodeAt).
void Append(char32_t cp, std::string* out) {
  if (cp >= kRawByte) {
    out->push_back(static_cast<char>(cp - kRawByte));
  } else {
    AppendUtf8(cp, out);
  }
}

bool IsCased(char32_t cp) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL ||
         category == UTF8PROC_CATEGORY_LT;
}

bool IsCaseIgnorable(char32_t cp) {
  switch (cp) {
    // Word_Break MidLetter, MidNumLet and Single_Quote.
    case U'\'':
    case U'.':
    case U':':
    case U'\u00B7':
    case U'\u0387':
    case U'\u055F':
    case U'\u05F4':
    case U'\u2018':
    case U'\u2019':
    case U'\u2024':
    case U'\u2027':
    case U'\uFE13':
    case U'\uFE52':
    case U'\uFE55':
    case U'\uFF07':
    case U'\uFF0E':
    case U'\uFF1A':
      return true;
    default:
      break;
  }
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_ME ||
         category == UTF8PROC_CATEGORY_CF || category == UTF8PROC_CATEGORY_LM ||
         category == UTF8PROC_CATEGORY_SK;
}

// CPython's handle_capital_sigma: final form when a cased letter precedes
// (skipping case-ignorables) and none follows.
bool IsFinalSigma(std::string_view text, size_t start, size_t end) {
  size_t pos = start;
  bool cased_before = false;
  while (pos > 0) {
    const char32_t cp = DecodeBefore(text, &pos);
    if (!IsCaseIgnorable(cp)) {
      cased_before = IsCased(cp);
      break;
    }
  }
  if (!cased_before) return false;
  pos = end;
  while (pos < text.size()) {
    const char32_t cp = DecodeAt(text, &pos);
    if (!IsCaseIgnorable(cp)) return !IsCased(cp);
  }
  return true;
}

}  // namespace

bool PyIsSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) ||
         cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view PyStrip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    if (!PyIsSpace(DecodeAt(text, &next))) break;
    begin = next;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t prev = end;
    if (!PyIsSpace(DecodeBefore(text, &prev))) break;
    end = prev;
  }
  return text.substr(begin, end - begin);
}

std::vector<std::string_view> PySplitWhitespace(std::string_view text) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  size_t word_start = std::string_view::npos;
  while (pos < text.size()) {
    const size_t at = pos;
    const bool space = PyIsSpace(DecodeAt(text, &pos));
    if (space && word_start != std::string_view::npos) {
      words.push_back(text.substr(word_start, at - word_start));
      word_start = std::string_view::npos;
    } else if (!space && word_start == std::string_view::npos) {
      word_start = at;
    }
  }
  if (word_start != std::string_view::npos) {
    words.push_back(text.substr(word_start));
  }
  return words;
}

std::vector<std::string_view> PySplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t line_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t at = pos;
    const char32_t cp = DecodeAt(text, &pos);
    const bool line_break = cp == U'\n' || cp == U'\r' || cp == 0x0B ||
                            cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                            cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!line_break) continue;
    lines.push_back(text.substr(line_start, at - line_start));
    if (cp == U'\r' && pos < text.size() && text[pos] == '\n') ++pos;
    line_start = pos;
  }
  if (line_start < text.size()) lines.push_back(text.substr(line_start));
  return lines;
}

std::string PyLower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t at = pos;
    const char32_t cp = DecodeAt(text, &pos);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (cp == 0x0130) {
      out.append("i\xCC\x87");
    } else if (cp == 0x03A3) {
      AppendUtf8(IsFinalSigma(text, at, pos) ? 0x03C2 : 0x03C3, &out);
    } else if (cp >= kRawByte) {
      Append(cp, &out);
    } else {
      AppendUtf8(static_cast<char32_t>(
                     utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))),
                 &out);
    }
  }
  return out;
}

std::string PyUpper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t cp = DecodeAt(text, &pos);
    Append(cp >= kRawByte ? cp
                          : static_cast<char32_t>(utf8proc_toupper(
                                static_cast<utf8proc_int32_t>(cp))),
           &out);
  }
  return out;
}

std::string_view CodePointPrefix(std::string_view text, size_t n) {
  size_t pos = 0;
  for (size_t i = 0; i < n && pos < text.size(); ++i) {
    DecodeAt(text, &pos);
  }
  return text.substr(0, pos);
}

bool PyDecimalToInt64(std::string_view digits, long long* out) {
  long long value = 0;
  size_t pos = 0;
  while (pos < digits.size()) {
    char32_t cp = DecodeAt(digits, &pos);
    if (cp >= kRawByte) return false;
    // Unicode encodes each decimal digit set (category Nd) as ten
    // consecutive code points 0..9, with sets that touch laid end to end; the
    // distance to the run's start, mod 10, is the digit's value.
    int offset = 0;
    while (utf8proc_category(static_cast<utf8proc_int32_t>(cp - 1)) ==
           UTF8PROC_CATEGORY_ND) {
      --cp;
      ++offset;
    }
    const int digit = offset % 10;
    if (value > (std::numeric_limits<long long>::max() - digit) / 10) {
      return false;
    }
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

}  // namespace mesa_anyjev::text
