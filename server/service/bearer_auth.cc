#include "server/service/bearer_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <string_view>

namespace mesa_anyjev::service {
namespace {

std::array<unsigned char, 32> Digest(std::string_view text) {
  std::array<unsigned char, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         out.data());
  return out;
}

constexpr std::string_view kScheme = "Bearer ";

}  // namespace

BearerAuth::BearerAuth(const std::optional<std::string>& token) {
  if (token.has_value()) {
    enabled_ = true;
    digest_ = Digest(*token);
  }
}

absl::Status BearerAuth::Check(const grpc::ServerContextBase& context) const {
  if (!enabled_) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing 'authorization: Bearer <token>' metadata");
  }
  const std::string_view value(it->second.data(), it->second.size());
  if (value.substr(0, kScheme.size()) != kScheme) {
    return absl::UnauthenticatedError(
        "authorization metadata must use the Bearer scheme");
  }
  const auto given = Digest(value.substr(kScheme.size()));
  if (CRYPTO_memcmp(given.data(), digest_.data(), digest_.size()) != 0) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::service
