// Who a call is: the bearer token it carries, matched against the tenants of
// the tokens file (common/auth/tokens_file.h) or the single token of
// auth.token_env / token_file. Works on plaintext and TLS ports alike
// (gRPC's AuthMetadataProcessor needs secure credentials). Tokens are
// compared as SHA-256 digests in constant time and never logged; nor are
// digests.
//
// The tenant set is replaced whole on SIGHUP (Replace); a call keeps the
// identity it was admitted with (its CallerIdentity holds the set), so a
// reload never fails a call in flight.
#pragma once

#include <grpcpp/server_context.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/auth/tokens_file.h"

namespace mesa_anyjev::service {

// A caller once its token matched: its tenant, or none when auth is off
// (then it may do everything, as tenant "").
class CallerIdentity {
 public:
  CallerIdentity() = default;  // auth off
  CallerIdentity(std::shared_ptr<const auth::TenantSet> set,
                 const auth::Tenant* tenant)
      : set_(std::move(set)), tenant_(tenant) {}

  bool anonymous() const { return tenant_ == nullptr; }
  const std::string& tenant_name() const;
  auth::Role role() const {
    return tenant_ != nullptr ? tenant_->role : auth::Role::kAdmin;
  }
  // The tenant's entry; null when auth is off.
  const auth::Tenant* tenant() const { return tenant_; }

 private:
  std::shared_ptr<const auth::TenantSet> set_;  // keeps tenant_ alive
  const auth::Tenant* tenant_ = nullptr;
};

class TenantAuth {
 public:
  // null = auth off: every call passes, as no tenant.
  explicit TenantAuth(std::shared_ptr<const auth::TenantSet> tenants);

  bool enabled() const { return enabled_; }
  // The tenants now in force (null when auth is off).
  std::shared_ptr<const auth::TenantSet> tenants() const;
  // From the next call on, `tenants` decide who is who; calls admitted
  // before keep their identity. Auth stays on (a set is never null here).
  void Replace(std::shared_ptr<const auth::TenantSet> tenants);

  // The caller, or UNAUTHENTICATED with a reason that never echoes what
  // was sent.
  absl::StatusOr<CallerIdentity> Authenticate(
      const grpc::ServerContextBase& context) const;

 private:
  const bool enabled_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const auth::TenantSet> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::service
