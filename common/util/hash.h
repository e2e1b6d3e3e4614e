// Hash helpers shared by the fake model and model identities: hex MD5 and
// SHA-256 digests (OpenSSL EVP), the reference's hash_unit jitter and a
// stable 64-bit seed for std::mt19937_64.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mesa_anyjev::util {

// Lower-case hex MD5 of the bytes of `data` (32 characters).
std::string Md5Hex(std::string_view data);

// Lower-case hex SHA-256 of the bytes of `data` (64 characters).
std::string Sha256Hex(std::string_view data);

// The reference's hash_unit: (int(first 8 hex chars of MD5(t), 16) mod 1000)
// / 1000, a value in [0, 0.999] in steps of 0.001.
double HashUnit(std::string_view text);

// The first 8 bytes of SHA-256(text), big-endian: a seed that is the same on
// every platform and run.
uint64_t Seed64(std::string_view text);

}  // namespace mesa_anyjev::util
