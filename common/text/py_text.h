// The one place for Python str semantics: the reference parses cards and
// builds question states with str.strip/splitlines/lower/upper, slices by
// code point and matches with `re`, and those strings end up in question
// states and so in keys; the fake model reads prompts the same way. These
// helpers reproduce CPython 3.11 on valid UTF-8; a byte that is not part of
// valid UTF-8 passes through unchanged (it is no character to map).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mesa_anyjev::text {

// str.isspace() for one code point: U+0009-000D, U+001C-001F, U+0020,
// U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F, U+205F,
// U+3000. `re`'s \s on str patterns matches the same set.
bool PyIsSpace(char32_t cp);

// The PCRE2 class for Python's \s (PCRE2's own \s lacks U+001C-001F).
inline constexpr std::string_view kPySpaceClass =
    "\\t\\n\\x0b\\f\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";

// str.strip() with no argument.
std::string_view PyStrip(std::string_view text);

// str.split() with no argument: runs of whitespace separate words.
std::vector<std::string_view> PySplitWhitespace(std::string_view text);

// str.splitlines(): breaks at \n, \r, \r\n, \v, \f, \x1c-\x1e, U+0085,
// U+2028 and U+2029; the breaks are dropped.
std::vector<std::string_view> PySplitLines(std::string_view text);

// str.lower(): full lower-case mapping (U+0130 becomes "i\u0307") with the
// final-sigma rule. Simple mappings come from utf8proc; "cased" and
// "case-ignorable" are read from general categories (Lu/Ll/Lt, and
// Mn/Me/Cf/Lm/Sk plus the MidLetter/MidNumLet/Single_Quote characters).
std::string PyLower(std::string_view text);

// str.upper() with simple (one-to-one) mappings; the SpecialCasing
// expansions (U+00DF to "SS", ligatures) are not applied. Used only on CURIE
// prefixes, where no registry id could be reached through one.
std::string PyUpper(std::string_view text);

// text[:n] on a str: the first `n` code points.
std::string_view CodePointPrefix(std::string_view text, size_t n);

// int(s) for a string of Unicode decimal digits (\d+ matched it); false on
// overflow of int64.
bool PyDecimalToInt64(std::string_view digits, long long* out);

}  // namespace mesa_anyjev::text
