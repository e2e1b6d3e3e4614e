// UTF-8 validation, iteration and lossy conversion (see utf8.h).
#include "common/text/utf8.h"

namespace mesa_anyjev::text {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence that lead byte `c` starts (0 when `c`
// cannot start one) and the range its second byte must fall in (Unicode
// table 3-7).
struct LeadInfo {
  int length;
  unsigned char second_lo;
  unsigned char second_hi;
};

LeadInfo Lead(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Bytes of the longest prefix of a well-formed sequence at `s[i]` (the whole
// sequence when it is complete), or 0 when `s[i]` cannot start one.
int ValidPrefix(std::string_view s, size_t i, bool* complete) {
  const auto c = static_cast<unsigned char>(s[i]);
  const LeadInfo lead = Lead(c);
  *complete = lead.length == 1;
  if (lead.length <= 1) return lead.length;
  int n = 1;
  for (; n < lead.length && i + n < s.size(); ++n) {
    const auto b = static_cast<unsigned char>(s[i + n]);
    const unsigned char lo = n == 1 ? lead.second_lo : 0x80;
    const unsigned char hi = n == 1 ? lead.second_hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  *complete = n == lead.length;
  return n;
}

}  // namespace

int64_t FirstInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    bool complete = false;
    const int n = ValidPrefix(text, i, &complete);
    if (!complete) return static_cast<int64_t>(i);
    i += n;
  }
  return -1;
}

size_t SequenceLength(std::string_view text, size_t i) {
  bool complete = false;
  const int n = ValidPrefix(text, i, &complete);
  return complete ? static_cast<size_t>(n) : 0;
}

std::string Printable(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const bool truncated = text.size() > max_bytes;
  // A sequence cut here is escaped below like any other broken one.
  text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size() + 3);
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = SequenceLength(text, i);
    const auto byte = static_cast<unsigned char>(text[i]);
    if (len == 0 || byte < 0x20 || byte == 0x7F) {
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  if (truncated) out += "...";
  return out;
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = *pos;
  const unsigned char c = s[i];
  if (c < 0x80) {
    *pos = i + 1;
    return c;
  }
  if (c < 0xE0) {
    *pos = i + 2;
    return (char32_t{c & 0x1Fu} << 6) | (s[i + 1] & 0x3Fu);
  }
  if (c < 0xF0) {
    *pos = i + 3;
    return (char32_t{c & 0x0Fu} << 12) | (char32_t{s[i + 1] & 0x3Fu} << 6) |
           (s[i + 2] & 0x3Fu);
  }
  *pos = i + 4;
  return (char32_t{c & 0x07u} << 18) | (char32_t{s[i + 1] & 0x3Fu} << 12) |
         (char32_t{s[i + 2] & 0x3Fu} << 6) | (s[i + 3] & 0x3Fu);
}

char32_t PrevCodePoint(std::string_view text, size_t* pos) {
  size_t i = *pos - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  *pos = i;
  size_t next = i;
  return NextCodePoint(text, &next);
}

char32_t DecodeAt(std::string_view text, size_t* pos) {
  if (SequenceLength(text, *pos) == 0) {
    return kRawByte + static_cast<unsigned char>(text[(*pos)++]);
  }
  return NextCodePoint(text, pos);
}

char32_t DecodeBefore(std::string_view text, size_t* pos) {
  const size_t end = *pos;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 &&
         (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  if (SequenceLength(text, start) == end - start) {
    *pos = start;
    size_t next = start;
    return NextCodePoint(text, &next);
  }
  *pos = end - 1;
  return kRawByte + static_cast<unsigned char>(text[end - 1]);
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool complete = false;
    const int n = ValidPrefix(bytes, i, &complete);
    if (complete) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += kReplacement;
      i += n == 0 ? 1 : n;
    }
  }
  return out;
}

}  // namespace mesa_anyjev::text
