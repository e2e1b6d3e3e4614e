// The GPT-2 byte-to-unicode table (bytes_to_unicode in GPT-2's encoder.py,
// ByteLevel in Hugging Face tokenizers) and its inverse.
#include "common/text/byte_level.h"

#include <array>

#include "common/text/utf8.h"

namespace mesa_anyjev::text {
namespace {

// Code points above this are never in the alphabet (256 + 68 = U+0143).
constexpr char32_t kMaxChar = 0x144;

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, kMaxChar> to_byte{};
};

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;  // non-printable bytes in byte order from U+0100
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
      t.to_char[b] = cp;
      t.to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

char32_t ByteLevelChar(uint8_t b) { return GetTables().to_char[b]; }

std::optional<uint8_t> ByteLevelByte(char32_t cp) {
  if (cp >= kMaxChar) return std::nullopt;
  const int16_t b = GetTables().to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    AppendUtf8(ByteLevelChar(static_cast<uint8_t>(c)), &out);
  }
  return out;
}

std::string ByteLevelDecodeToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const std::optional<uint8_t> b = ByteLevelByte(NextCodePoint(token, &pos));
    if (!b.has_value()) return std::string(token);
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace mesa_anyjev::text
