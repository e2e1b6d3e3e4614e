// Where a daemon's tenants come from (auth.*): the tokens file, the single
// token of auth.token_env / token_file as tenant "default" (role admin), or
// nothing (auth off). Read at start and again on SIGHUP.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/auth/tokens_file.h"
#include "common/config/config.h"

namespace mesa_anyjev::auth {

// The tenants `config` grants; null when auth is off. INVALID_ARGUMENT
// naming the key, the file and the entry when they cannot be read.
absl::StatusOr<std::shared_ptr<const TenantSet>> LoadTenants(
    const config::AuthConfig& config);

// The tenants for a log line, never a token or a digest:
// "2 tenants, 3 tokens: ops (admin), pipe (decide, weight 2, batch only)".
std::string DescribeTenants(const TenantSet& tenants);

}  // namespace mesa_anyjev::auth
