// Unicode NFC for the tokenizer's normalizer, on utf8proc, with a quick
// check so text that NFC cannot change (ASCII, CJK, most scripts without
// combining marks) is not copied.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::text {

// True when NFC certainly leaves `text` (valid UTF-8) as it is; false when
// it might change it.
bool NfcUnchanged(std::string_view text);

// NFC of `text` (valid UTF-8).
absl::StatusOr<std::string> ToNfc(std::string_view text);

}  // namespace mesa_anyjev::text
