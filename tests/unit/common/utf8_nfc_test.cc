// Tests for the tokenizer's UTF-8 and NFC helpers: the lossy conversion
// matches Python's errors="replace" (and Rust's from_utf8_lossy), and the NFC
// quick check never calls a text stable that NFC would change.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/text/nfc.h"
#include "common/text/py_text.h"
#include "common/text/utf8.h"
#include "utf8proc.h"

namespace mesa_anyjev::text {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST_CASE("Utf8Lossy replaces each maximal ill-formed subpart once", "[utf8]") {
  // Expected values from Python: bytes.decode("utf-8", "replace").
  struct Case {
    std::string in;
    std::string out;
  };
  const std::vector<Case> cases = {
      {"plain", "plain"},
      {"\xE2\x82"
       "x",
       kFffd + "x"},
      {"\xF0\x9F\x98", kFffd},
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},
      {"\xC0\xAF", kFffd + kFffd},
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},
      {"\x80\x80", kFffd + kFffd},
      {"\xE4\xBD\xA0\xE4\xBD", "\xE4\xBD\xA0" + kFffd},
      {"a\xFF"
       "b",
       "a" + kFffd + "b"},
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
  };
  for (const Case& c : cases) {
    CHECK(Utf8Lossy(c.in) == c.out);
  }
}

TEST_CASE("Code point iteration both ways", "[utf8]") {
  const std::string text = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80";
  std::vector<char32_t> forward;
  for (size_t pos = 0; pos < text.size();) {
    forward.push_back(NextCodePoint(text, &pos));
  }
  CHECK(forward == std::vector<char32_t>{U'a', 0xE9, 0x4F60, 0x1F600});
  std::vector<char32_t> backward;
  for (size_t pos = text.size(); pos > 0;) {
    backward.push_back(PrevCodePoint(text, &pos));
  }
  CHECK(backward == std::vector<char32_t>{0x1F600, 0x4F60, 0xE9, U'a'});
  std::string rebuilt;
  for (const char32_t cp : forward) AppendUtf8(cp, &rebuilt);
  CHECK(rebuilt == text);
}

TEST_CASE("NFC composes, reorders and leaves stable text alone", "[nfc]") {
  CHECK(*ToNfc("e\xCC\x81") == "\xC3\xA9");                // e + U+0301
  CHECK(*ToNfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") ==  // jamo -> 각
        "\xEA\xB0\x81");
  CHECK(*ToNfc("q\xCC\x87\xCC\xA3") == "q\xCC\xA3\xCC\x87");  // reordered
  CHECK(*ToNfc(std::string("a\0b", 3)) == std::string("a\0b", 3));
  CHECK(NfcUnchanged("plain ASCII, caf\xC3\xA9"));
  CHECK(NfcUnchanged("\xE4\xBD\xA0\xE5\xA5\xBD"));
  CHECK_FALSE(NfcUnchanged("e\xCC\x81"));
  CHECK_FALSE(NfcUnchanged("\xE1\x84\x80\xE1\x85\xA1"));
}

TEST_CASE("The NFC quick check is safe for every code point", "[nfc]") {
  // Whatever NfcUnchanged accepts alone must be NFC-stable alone and must
  // never be the second half of a canonical composition pair.
  int accepted = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    AppendUtf8(cp, &s);
    if (!NfcUnchanged(s)) continue;
    ++accepted;
    const auto nfc = ToNfc(s);
    if (!nfc.ok() || *nfc != s) {
      FAIL("U+" << std::hex << static_cast<uint32_t>(cp));
    }
  }
  CHECK(accepted > 1000000);
  for (char32_t cp = 0x80; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    utf8proc_int32_t parts[4];
    int last_boundclass = 0;
    const utf8proc_ssize_t n =
        utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), parts, 4,
                                UTF8PROC_DECOMPOSE, &last_boundclass);
    if (n != 2) continue;
    // cp = parts[0] + parts[1] canonically; the second part must be flagged
    // unless the pair does not compose back (composition exclusions).
    std::string pair;
    AppendUtf8(static_cast<char32_t>(parts[0]), &pair);
    AppendUtf8(static_cast<char32_t>(parts[1]), &pair);
    std::string second;
    AppendUtf8(static_cast<char32_t>(parts[1]), &second);
    if (*ToNfc(pair) != pair && NfcUnchanged(second)) {
      FAIL("second half U+" << std::hex << parts[1] << " of U+"
                            << static_cast<uint32_t>(cp) << " not flagged");
    }
  }
}

TEST_CASE("DecodeAt and DecodeBefore are safe on any bytes", "[utf8]") {
  // A lead byte at the very end, a lone continuation, an overlong form.
  const std::string text = "a\xC3\xA9\x80\xC0\xAF\xF0";
  std::vector<char32_t> forward;
  for (size_t pos = 0; pos < text.size();)
    forward.push_back(DecodeAt(text, &pos));
  CHECK(forward == std::vector<char32_t>{U'a', 0xE9, kRawByte + 0x80,
                                         kRawByte + 0xC0, kRawByte + 0xAF,
                                         kRawByte + 0xF0});
  std::vector<char32_t> backward;
  for (size_t pos = text.size(); pos > 0;) {
    backward.push_back(DecodeBefore(text, &pos));
  }
  std::reverse(backward.begin(), backward.end());
  CHECK(backward == forward);
  // Python's lower() on the valid part; the raw bytes pass through.
  CHECK(PyLower("\xC3\x89T\xFF\xC4\xB0") == "\xC3\xA9t\xFFi\xCC\x87");
  CHECK(PyStrip(" \xFF ") == "\xFF");
}

}  // namespace
}  // namespace mesa_anyjev::text
