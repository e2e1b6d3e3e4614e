// NFC on utf8proc (see nfc.h).
#include "common/text/nfc.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"
#include "utf8proc.h"

namespace mesa_anyjev::text {

bool NfcUnchanged(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t cp = NextCodePoint(text, &pos);
    // Below U+0300 nothing decomposes into something NFC does not compose
    // back, and nothing combines with what precedes it.
    if (cp < 0x300) continue;
    // Hangul vowel and trailing jamo compose with what precedes them
    // (algorithmically, so utf8proc's tables do not flag them).
    if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) {
      return false;
    }
    const utf8proc_property_t* p =
        utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    // Reordered (non-zero combining class), canonically decomposed, or able
    // to compose with its predecessor (utf8proc marks second characters of
    // a composition with comb_index >= 0x8000).
    if (p->combining_class != 0) return false;
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;
    if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  }
  return true;
}

absl::StatusOr<std::string> ToNfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &out,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("NFC normalization failed: ", utf8proc_errmsg(n)));
  }
  std::string result(reinterpret_cast<const char*>(out),
                     static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace mesa_anyjev::text
