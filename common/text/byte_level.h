// GPT-2's byte-level alphabet: every byte maps to one printable code point
// (printable Latin-1 bytes to themselves, the rest to U+0100 upwards), so a
// byte-level BPE vocabulary spells any byte string with visible characters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mesa_anyjev::text {

// The code point byte `b` is spelled with.
char32_t ByteLevelChar(uint8_t b);

// The byte that code point `cp` spells, if it is one of the alphabet's 256.
std::optional<uint8_t> ByteLevelByte(char32_t cp);

// The UTF-8 spelling of `bytes` in the alphabet ("Ġhello" for " hello").
std::string ByteLevelEncode(std::string_view bytes);

// The bytes a token spelled `token` stands for, as Hugging Face's ByteLevel
// decoder computes them: each character mapped back to its byte when all of
// them are in the alphabet, else the token's own UTF-8 bytes (added tokens
// such as "<|im_start|>" need neither; ones with a space take the latter).
// `token` must be valid UTF-8.
std::string ByteLevelDecodeToken(std::string_view token);

}  // namespace mesa_anyjev::text
