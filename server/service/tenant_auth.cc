// Tenants by bearer token (see tenant_auth.h).
#include "server/service/tenant_auth.h"

#include <string_view>
#include <utility>

namespace mesa_anyjev::service {
namespace {

constexpr std::string_view kScheme = "Bearer ";

}  // namespace

const std::string& CallerIdentity::tenant_name() const {
  static const std::string kNone;
  return tenant_ != nullptr ? tenant_->name : kNone;
}

TenantAuth::TenantAuth(std::shared_ptr<const auth::TenantSet> tenants)
    : enabled_(tenants != nullptr), tenants_(std::move(tenants)) {}

std::shared_ptr<const auth::TenantSet> TenantAuth::tenants() const {
  absl::MutexLock lock(&mu_);
  return tenants_;
}

void TenantAuth::Replace(std::shared_ptr<const auth::TenantSet> tenants) {
  absl::MutexLock lock(&mu_);
  tenants_ = std::move(tenants);
}

absl::StatusOr<CallerIdentity> TenantAuth::Authenticate(
    const grpc::ServerContextBase& context) const {
  if (!enabled_) return CallerIdentity();
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
  // Digests, not tokens, are compared: the time taken says nothing about
  // the token's length either.
  const auth::TokenDigest given = auth::DigestOf(value.substr(kScheme.size()));
  std::shared_ptr<const auth::TenantSet> set = tenants();
  const auth::Tenant* tenant = set->Match(given);
  if (tenant == nullptr) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return CallerIdentity(std::move(set), tenant);
}

}  // namespace mesa_anyjev::service
