// `mesa-anyjev tokens add`: makes a bearer token for a tenant, prints it
// once, and appends its SHA-256 to the daemon's tokens file
// (common/auth/tokens_file.h). The file is rewritten whole and atomically
// (a temporary of mode 0600 beside it, fsync, rename), and only once the
// result parses as the daemon will parse it; an flock on its directory
// keeps two adds from losing one another's entry. The token itself is
// never written anywhere.
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/commands/commands.h"
#include "client/ui/terminal.h"
#include "common/auth/tokens_file.h"
#include "common/status/status_macros.h"
#include "common/util/files.h"

namespace mesa_anyjev::client {
namespace {

constexpr char kHeader[] =
    "# mesa-anyjev tokens file (auth.tokens_file): one entry per token, the\n"
    "# SHA-256 of the token, never the token. Written by `mesa-anyjev tokens\n"
    "# add`; remove an entry to revoke its token. The daemon reads this file\n"
    "# again on SIGHUP (docs/operations.md, \"Tenants and roles\").\n";

int Usage(const std::string& message) {
  std::cerr << "mesa-anyjev tokens add: " << message << "\n";
  return 2;
}

int Failed(const std::string& message) {
  std::cerr << "mesa-anyjev tokens add: " << message << "\n";
  return 1;
}

// 32 random bytes as 64 hex digits.
absl::StatusOr<std::string> MakeToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return absl::InternalError("no random bytes from OpenSSL");
  }
  std::string token;
  for (unsigned char byte : bytes) absl::StrAppendFormat(&token, "%02x", byte);
  return token;
}

absl::StatusOr<Priority> ClassFlag(const char* flag, const std::string& value) {
  const auto parsed = PriorityNamed(value);
  if (parsed.has_value()) return *parsed;
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": '", value, "' is not ", PriorityNames()));
}

// The tenant the new entry grants: the flags over the tenant's entry when
// the file already names it (a rotation: the same role and shares).
absl::StatusOr<auth::Tenant> NewTenant(const TokensAddOptions& options,
                                       const auth::TenantSet* existing) {
  auth::Tenant tenant;
  if (existing != nullptr) {
    if (const auth::Tenant* found = existing->Find(options.tenant)) {
      tenant = *found;
    }
  }
  tenant.name = options.tenant;
  if (options.role.has_value()) {
    const auto role = auth::ParseRole(*options.role);
    if (!role.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--role: '", *options.role, "' is not ", auth::RoleNames()));
    }
    tenant.role = *role;
  } else if (existing == nullptr || existing->Find(options.tenant) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--role is required for a new tenant (", auth::RoleNames(), ")"));
  }
  if (options.weight.has_value()) tenant.weight = *options.weight;
  if (options.max_queued_calls.has_value()) {
    tenant.max_queued_calls = *options.max_queued_calls;
  }
  if (options.max_queued_tokens.has_value()) {
    tenant.max_queued_tokens = *options.max_queued_tokens;
  }
  if (options.priority.has_value()) {
    ASSIGN_OR_RETURN(tenant.priority,
                     ClassFlag("--priority", *options.priority));
  }
  if (options.max_priority.has_value()) {
    ASSIGN_OR_RETURN(tenant.max_priority,
                     ClassFlag("--max-priority", *options.max_priority));
  }
  return tenant;
}

// Holds an exclusive flock on the file's directory while it lives.
absl::StatusOr<int> LockDirectory(const std::string& file) {
  const std::filesystem::path parent =
      std::filesystem::path(file).has_parent_path()
          ? std::filesystem::path(file).parent_path()
          : std::filesystem::path(".");
  const int fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    if (fd >= 0) close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock the directory ", parent.string(), ": ",
                     std::strerror(errno)));
  }
  return fd;
}

// The file's text and what it grants now ("" and null when it does not
// exist yet).
absl::StatusOr<std::pair<std::string, std::shared_ptr<const auth::TenantSet>>>
ReadExisting(const std::string& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    if (errno == ENOENT) return std::pair{std::string(), nullptr};
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", file, ": ", std::strerror(errno)));
  }
  if (info.st_size == 0) return std::pair{std::string(), nullptr};
  ASSIGN_OR_RETURN(auto set, auth::ReadTokensFile(file, "--file"));
  ASSIGN_OR_RETURN(std::string text, util::ReadFile(file));
  return std::pair{std::move(text), std::move(set)};
}

}  // namespace

int RunTokensAdd(const TokensAddOptions& options) {
  if (absl::Status name = auth::CheckTenantName(options.tenant); !name.ok()) {
    return Usage(
        absl::StrCat("--tenant: '", options.tenant, "': ", name.message()));
  }
  auto locked = LockDirectory(options.file);
  if (!locked.ok()) return Failed(std::string(locked.status().message()));
  const absl::Cleanup unlock = [fd = *locked] { close(fd); };
  auto existing = ReadExisting(options.file);
  if (!existing.ok()) {
    return Failed(
        absl::StrCat(existing.status().message(), "; nothing was written"));
  }
  auto& [text, set] = *existing;
  auto tenant = NewTenant(options, set.get());
  if (!tenant.ok()) return Usage(std::string(tenant.status().message()));
  auto token = MakeToken();
  if (!token.ok()) return Failed(std::string(token.status().message()));
  std::string updated = text.empty() ? kHeader : text;
  if (updated.back() != '\n') updated += '\n';
  updated += auth::EntryText(
      *tenant, auth::DigestOf(*token),
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
  // Never write what the daemon would refuse (a weight of 0, a tenant
  // whose other entries disagree).
  if (auto parsed = auth::ParseTokensFile(updated, options.file);
      !parsed.ok()) {
    return Usage(
        absl::StrCat(parsed.status().message(), "; nothing was written"));
  }
  if (absl::Status written =
          util::WriteFileAtomic(options.file, updated, /*mode=*/0600);
      !written.ok()) {
    return Failed(absl::StrCat(written.message(), "; nothing was written"));
  }
  if (options.json) {
    ui::PrintJson(nlohmann::ordered_json{{"tenant", tenant->name},
                                         {"role", auth::RoleName(tenant->role)},
                                         {"token", *token},
                                         {"file", options.file}},
                  std::cout);
  } else {
    std::cout << *token << "\n";
  }
  std::cerr << "added a token of tenant '" << tenant->name << "' (role "
            << auth::RoleName(tenant->role) << ") to " << options.file
            << "; it is shown only now. The daemon takes it on SIGHUP "
               "(systemctl reload mesa-anyjevd, or kill -HUP its pid).\n";
  return 0;
}

}  // namespace mesa_anyjev::client
