// The one place for UTF-8: validation with the offending offset, code point
// iteration over text already validated, the lossy conversion the byte-level
// decoder applies to decoded bytes, and escaping for messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mesa_anyjev::text {

// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 when the
// text is valid (overlong forms, surrogates and values above U+10FFFF are
// invalid).
int64_t FirstInvalidUtf8(std::string_view text);

// Bytes of the well-formed sequence that starts at `text[i]`, or 0 when none
// does there (i < text.size()).
size_t SequenceLength(std::string_view text, size_t i);

// `text` for an error message or log line: valid UTF-8 is kept, control
// bytes and bytes that are not well-formed UTF-8 become \xNN, and anything
// past `max_bytes` of input becomes "...". Names and values read from a
// request or a file pass through it, so hostile input can neither break a
// message's encoding, forge log lines, nor make a message megabytes long.
std::string Printable(std::string_view text, size_t max_bytes = 256);

// The code point that starts at `text[*pos]`; advances `*pos` past it.
// `text` must be valid UTF-8 and `*pos` a character boundary.
char32_t NextCodePoint(std::string_view text, size_t* pos);

// The code point that ends just before `text[*pos]`; moves `*pos` back to
// its first byte. Same preconditions as NextCodePoint, and `*pos` > 0.
char32_t PrevCodePoint(std::string_view text, size_t* pos);

// Safe on any bytes: the code point at `text[*pos]` (advancing past it), or
// kRawByte + the byte when no well-formed sequence starts there (advancing
// one byte). Raw bytes are above U+10FFFF, so no character class holds them.
inline constexpr char32_t kRawByte = 0x110000;
char32_t DecodeAt(std::string_view text, size_t* pos);
// The same backwards: what ends just before `text[*pos]` (*pos > 0).
char32_t DecodeBefore(std::string_view text, size_t* pos);

// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
void AppendUtf8(char32_t cp, std::string* out);

// `bytes` as valid UTF-8: each maximal ill-formed subsequence becomes one
// U+FFFD (Unicode's "maximal subpart" practice, as Rust's
// String::from_utf8_lossy and Python's errors="replace" do).
std::string Utf8Lossy(std::string_view bytes);

}  // namespace mesa_anyjev::text
