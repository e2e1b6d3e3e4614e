// The daemon's tenants (see tenant_source.h).
#include "common/auth/tenant_source.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "common/util/secret.h"

namespace mesa_anyjev::auth {

absl::StatusOr<std::shared_ptr<const TenantSet>> LoadTenants(
    const config::AuthConfig& config) {
  if (!config.tokens_file.empty()) return ReadTokensFile(config.tokens_file);
  ASSIGN_OR_RETURN(
      const std::optional<std::string> token,
      util::LoadSecret(config.token_env, config.token_file, "auth"));
  if (!token.has_value()) return nullptr;
  return SingleTokenSet(*token);
}

std::string DescribeTenants(const TenantSet& tenants) {
  std::vector<std::string> each;
  for (const Tenant& t : tenants.tenants()) {
    std::vector<std::string> traits = {RoleName(t.role)};
    if (t.weight != 1.0) traits.push_back(absl::StrCat("weight ", t.weight));
    if (t.max_priority == Priority::kBatch) {
      traits.push_back("batch only");
    } else if (t.priority == Priority::kBatch) {
      traits.push_back("batch by default");
    }
    if (t.max_queued_calls != 0) {
      traits.push_back(absl::StrCat("max ", t.max_queued_calls, " calls"));
    }
    if (t.max_queued_tokens != 0) {
      traits.push_back(absl::StrCat("max ", t.max_queued_tokens, " tokens"));
    }
    each.push_back(
        absl::StrCat(t.name, " (", absl::StrJoin(traits, ", "), ")"));
  }
  const size_t n = tenants.tenants().size();
  return absl::StrCat(n, n == 1 ? " tenant, " : " tenants, ",
                      tenants.token_count(),
                      tenants.token_count() == 1 ? " token: " : " tokens: ",
                      absl::StrJoin(each, ", "));
}

}  // namespace mesa_anyjev::auth
