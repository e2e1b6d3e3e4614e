// The tokens file (auth.tokens_file; docs/operations.md, "Tenants and
// roles"): a YAML list, one entry per token, each naming its tenant, the
// SHA-256 of the token (never the token), the tenant's role and, optionally,
// its weight, queue limits and priority classes. Several entries may name one
// tenant (a token being rotated); they must then agree on everything but the
// digest. Parsed here for the daemon (at start and on SIGHUP) and the CLI
// (`tokens add`), so both refuse the same files with the same words.
//
//   - tenant: pipeline-a
//     sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
//     role: decide
//     weight: 2
//     priority: batch
//     max_priority: batch
//     max_queued_calls: 16
//     max_queued_tokens: 200000
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/auth/tenant.h"

namespace mesa_anyjev::auth {

using TokenDigest = std::array<unsigned char, 32>;

// SHA-256 of a bearer token's bytes.
TokenDigest DigestOf(std::string_view token);

// What one file (or the single auth.token_file / token_env) grants.
class TenantSet {
 public:
  struct Token {
    TokenDigest digest;
    size_t tenant;  // index into tenants()
  };

  TenantSet(std::vector<Tenant> tenants, std::vector<Token> tokens)
      : tenants_(std::move(tenants)), tokens_(std::move(tokens)) {}

  // One tenant per name, in the file's order of first appearance.
  const std::vector<Tenant>& tenants() const { return tenants_; }
  size_t token_count() const { return tokens_.size(); }
  // The tenant named so, or null.
  const Tenant* Find(std::string_view name) const;
  // The tenant of the token whose digest this is, or null. Every digest is
  // compared, each in constant time, so the time taken says nothing about
  // which entry (if any) matched.
  const Tenant* Match(const TokenDigest& digest) const;

 private:
  std::vector<Tenant> tenants_;
  std::vector<Token> tokens_;
};

// Bounds on what a file may hold (a metric label per tenant, a digest
// compared per token on every call).
inline constexpr size_t kMaxTokenEntries = 1024;
inline constexpr int64_t kMaxTokensFileBytes = 1 << 20;

// The tenants of the file's text. `where` names it in errors (the key and
// path); each refusal names the entry (its position, tenant and line) and
// the field and rule, never a digest: "auth.tokens_file (/etc/t.yaml):
// entry 3 (tenant 'pipe', line 9): weight: 0 is not > 0". An empty file
// grants nothing and is refused: a daemon with auth on must admit someone.
absl::StatusOr<std::shared_ptr<const TenantSet>> ParseTokensFile(
    const std::string& text, const std::string& where);

// The file at `path`, read as ParseTokensFile reads its text: refused when
// it is missing, not a regular file, larger than kMaxTokensFileBytes, or
// readable by its group or others (chmod 600).
absl::StatusOr<std::shared_ptr<const TenantSet>> ReadTokensFile(
    const std::string& path, const std::string& key = "auth.tokens_file");

// The single token of auth.token_env / token_file, as one tenant:
// kLegacyTenant, role admin.
inline constexpr char kLegacyTenant[] = "default";
std::shared_ptr<const TenantSet> SingleTokenSet(std::string_view token);

// One entry in the file's own form (a YAML list item, ending in a newline),
// for `tokens add` to append; `created` (a UTC time) is a note for people
// rotating tokens, "" for none.
std::string EntryText(const Tenant& tenant, const TokenDigest& digest,
                      std::string_view created = "");

}  // namespace mesa_anyjev::auth
