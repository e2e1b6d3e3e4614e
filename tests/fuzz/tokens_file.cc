// The daemon's tokens file (auth.tokens_file) through its parser; what
// parses must survive the round trip through the entries `tokens add`
// writes, tenant for tenant.
#include "common/auth/tokens_file.h"

#include <cstdlib>
#include <string>

#include "common/auth/tenant_source.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev::auth;
  const std::string text(mesa_anyjev::fuzz::AsText(data, size));
  auto set = ParseTokensFile(text, "fuzz");
  if (!set.ok()) return 0;
  (void)DescribeTenants(**set);
  (void)(*set)->Match(DigestOf(text));
  std::string again;
  for (const Tenant& tenant : (*set)->tenants()) {
    again += EntryText(tenant, DigestOf(tenant.name), "now");
  }
  auto back = ParseTokensFile(again, "fuzz round trip");
  if (!back.ok() || (*back)->tenants().size() != (*set)->tenants().size()) {
    std::abort();
  }
  for (const Tenant& tenant : (*set)->tenants()) {
    const Tenant* read = (*back)->Match(DigestOf(tenant.name));
    if (read == nullptr || read->name != tenant.name ||
        read->role != tenant.role || read->weight != tenant.weight ||
        read->max_queued_calls != tenant.max_queued_calls ||
        read->max_queued_tokens != tenant.max_queued_tokens ||
        read->priority != tenant.priority ||
        read->max_priority != tenant.max_priority) {
      std::abort();
    }
  }
  return 0;
}
