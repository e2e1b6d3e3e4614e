// MD5 / SHA-256 through OpenSSL's EVP interface (the low-level MD5() calls are
// deprecated in OpenSSL 3).
#include "common/util/hash.h"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>

namespace mesa_anyjev::util {
namespace {

// Digest of `data` with `md`; EVP_Digest only fails on allocation failure,
// which the process cannot recover from anyway.
std::array<unsigned char, EVP_MAX_MD_SIZE> Digest(std::string_view data,
                                                  const EVP_MD* md,
                                                  unsigned int* size) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  if (EVP_Digest(data.data(), data.size(), out.data(), size, md, nullptr) !=
      1) {
    std::abort();
  }
  return out;
}

std::string ToHex(const unsigned char* bytes, unsigned int size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(static_cast<size_t>(size) * 2, '0');
  for (unsigned int i = 0; i < size; ++i) {
    hex[2 * i] = kHex[bytes[i] >> 4];
    hex[2 * i + 1] = kHex[bytes[i] & 0xF];
  }
  return hex;
}

}  // namespace

std::string Md5Hex(std::string_view data) {
  unsigned int size = 0;
  const auto digest = Digest(data, EVP_md5(), &size);
  return ToHex(digest.data(), size);
}

std::string Sha256Hex(std::string_view data) {
  unsigned int size = 0;
  const auto digest = Digest(data, EVP_sha256(), &size);
  return ToHex(digest.data(), size);
}

double HashUnit(std::string_view text) {
  unsigned int size = 0;
  const auto digest = Digest(text, EVP_md5(), &size);
  // The first 8 hex characters are the first 4 bytes, big-endian.
  const uint32_t head = (uint32_t{digest[0]} << 24) |
                        (uint32_t{digest[1]} << 16) |
                        (uint32_t{digest[2]} << 8) | uint32_t{digest[3]};
  // Both operands are exact doubles, so the quotient is the correctly rounded
  // value Python's `/` gives.
  return static_cast<double>(head % 1000) / 1000.0;
}

uint64_t Seed64(std::string_view text) {
  unsigned int size = 0;
  const auto digest = Digest(text, EVP_sha256(), &size);
  uint64_t seed = 0;
  for (int i = 0; i < 8; ++i) {
    seed = (seed << 8) | digest[i];
  }
  return seed;
}

}  // namespace mesa_anyjev::util
