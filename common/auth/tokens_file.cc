// The tokens file (see tokens_file.h).
#include "common/auth/tokens_file.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config/yaml_document.h"
#include "common/status/status_macros.h"
#include "common/text/utf8.h"
#include "common/util/files.h"
#include "common/util/suggest.h"

namespace mesa_anyjev::auth {
namespace {

const std::vector<std::string> kFields = {
    "tenant",   "sha256",           "role",
    "weight",   "max_queued_calls", "max_queued_tokens",
    "priority", "max_priority",     "created"};

// A weight over this is a typo, not a share (and keeps the engine's virtual
// clocks finite).
constexpr double kMaxWeight = 1e6;
// Queue limits above these are typos (the whole queue holds far fewer).
constexpr int64_t kMaxQueuedCalls = 1'000'000;
constexpr int64_t kMaxQueuedTokens = int64_t{1} << 40;

std::string FormatNumber(double value) {
  char buffer[32];
  const auto [end, error] =
      std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

absl::Status FieldError(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string Scalar(const YAML::Node& value) {
  return value.IsScalar() ? value.Scalar() : std::string();
}

absl::StatusOr<std::string> Text(const YAML::Node& value,
                                 const std::string& field) {
  if (!value.IsScalar() || value.Scalar().empty()) {
    return FieldError(field, "must be a non-empty string");
  }
  return value.Scalar();
}

absl::StatusOr<TokenDigest> ParseDigest(const YAML::Node& value) {
  const std::string text = Scalar(value);
  TokenDigest digest{};
  if (text.size() != 2 * digest.size() ||
      !std::all_of(text.begin(), text.end(),
                   [](char c) { return absl::ascii_isxdigit(c); })) {
    return FieldError("sha256",
                      "must be 64 hex digits, the SHA-256 of the token "
                      "(mesa-anyjev tokens add writes it)");
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    std::from_chars(text.data() + 2 * i, text.data() + 2 * i + 2, digest[i],
                    16);
  }
  return digest;
}

// The number the whole of `text` spells, if it spells one.
template <typename T>
std::optional<T> WholeNumber(const std::string& text) {
  T n{};
  const auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || error != std::errc() ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  return n;
}

absl::StatusOr<double> ParseWeight(const YAML::Node& value) {
  const std::string text = Scalar(value);
  const std::optional<double> weight = WholeNumber<double>(text);
  if (!weight.has_value()) {
    return FieldError("weight", absl::StrCat("'", text::Printable(text, 32),
                                             "' is not a number"));
  }
  if (!std::isfinite(*weight) || *weight <= 0 || *weight > kMaxWeight) {
    return FieldError("weight",
                      absl::StrCat(text, " is not in (0, ",
                                   static_cast<int64_t>(kMaxWeight), "]"));
  }
  return *weight;
}

absl::StatusOr<int64_t> ParseLimit(const YAML::Node& value,
                                   const std::string& field, int64_t max) {
  const std::string text = Scalar(value);
  const std::optional<int64_t> n = WholeNumber<int64_t>(text);
  if (!n.has_value()) {
    return FieldError(field, absl::StrCat("'", text::Printable(text, 32),
                                          "' is not an integer"));
  }
  if (*n < 0 || *n > max) {
    return FieldError(field, absl::StrCat(*n, " is not in [0, ", max,
                                          "] (0: the engine's default)"));
  }
  return *n;
}

absl::StatusOr<Priority> ParseClass(const YAML::Node& value,
                                    const std::string& field) {
  const std::string text = Scalar(value);
  if (const auto parsed = PriorityNamed(text); parsed.has_value()) {
    return *parsed;
  }
  return FieldError(field, absl::StrCat("'", text::Printable(text, 32),
                                        "' is not ", PriorityNames()));
}

struct Entry {
  Tenant tenant;
  TokenDigest digest{};
};

absl::StatusOr<Entry> ParseEntry(const YAML::Node& node) {
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(
        "must be a mapping (tenant: ..., sha256: ..., role: ...)");
  }
  Entry entry;
  bool has_digest = false;
  bool has_role = false;
  std::set<std::string> seen;
  for (const auto& item : node) {
    const std::string key = Scalar(item.first);
    const YAML::Node& value = item.second;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", text::Printable(key, 64), "' given twice"));
    }
    if (key == "tenant") {
      ASSIGN_OR_RETURN(entry.tenant.name, Text(value, "tenant"));
      if (absl::Status ok = CheckTenantName(entry.tenant.name); !ok.ok()) {
        return FieldError(
            "tenant", absl::StrCat("'", text::Printable(entry.tenant.name, 64),
                                   "': ", ok.message()));
      }
    } else if (key == "sha256") {
      ASSIGN_OR_RETURN(entry.digest, ParseDigest(value));
      has_digest = true;
    } else if (key == "role") {
      const std::string text = Scalar(value);
      const auto role = ParseRole(text);
      if (!role.has_value()) {
        return FieldError("role", absl::StrCat("'", text::Printable(text, 32),
                                               "' is not ", RoleNames()));
      }
      entry.tenant.role = *role;
      has_role = true;
    } else if (key == "weight") {
      ASSIGN_OR_RETURN(entry.tenant.weight, ParseWeight(value));
    } else if (key == "max_queued_calls") {
      ASSIGN_OR_RETURN(entry.tenant.max_queued_calls,
                       ParseLimit(value, key, kMaxQueuedCalls));
    } else if (key == "max_queued_tokens") {
      ASSIGN_OR_RETURN(entry.tenant.max_queued_tokens,
                       ParseLimit(value, key, kMaxQueuedTokens));
    } else if (key == "priority") {
      ASSIGN_OR_RETURN(entry.tenant.priority, ParseClass(value, key));
    } else if (key == "max_priority") {
      ASSIGN_OR_RETURN(entry.tenant.max_priority, ParseClass(value, key));
    } else if (key == "created") {
      RETURN_IF_ERROR(Text(value, key).status());  // a note for people
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field '", text::Printable(key, 64), "'",
                       util::DidYouMean(key, kFields),
                       "; fields: ", absl::StrJoin(kFields, ", ")));
    }
  }
  if (entry.tenant.name.empty()) return FieldError("tenant", "missing");
  if (!has_digest) return FieldError("sha256", "missing");
  if (!has_role) {
    return FieldError("role", absl::StrCat("missing (", RoleNames(), ")"));
  }
  if (entry.tenant.priority.has_value() &&
      entry.tenant.Resolve(std::nullopt) != *entry.tenant.priority) {
    return FieldError("priority", "interactive is above max_priority batch");
  }
  return entry;
}

// Why two entries of one tenant disagree, or "".
std::string Disagreement(const Tenant& a, const Tenant& b) {
  if (a.role != b.role) return "role";
  if (a.weight != b.weight) return "weight";
  if (a.max_queued_calls != b.max_queued_calls) return "max_queued_calls";
  if (a.max_queued_tokens != b.max_queued_tokens) return "max_queued_tokens";
  if (a.priority != b.priority) return "priority";
  if (a.max_priority != b.max_priority) return "max_priority";
  return "";
}

std::string EntryName(size_t index, const std::string& tenant,
                      const YAML::Node& node) {
  std::string name = absl::StrCat("entry ", index + 1);
  const YAML::Mark mark = node.Mark();
  if (!tenant.empty()) absl::StrAppend(&name, " (tenant '", tenant, "'");
  if (!mark.is_null()) {
    absl::StrAppend(&name, tenant.empty() ? " (" : ", ", "line ",
                    mark.line + 1);
  }
  if (!tenant.empty() || !mark.is_null()) name += ")";
  return name;
}

absl::StatusOr<std::shared_ptr<const TenantSet>> FromDocument(
    const YAML::Node& root, const std::string& where) {
  if (!root.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the top level must be a list of entries (- tenant: ...)"));
  }
  if (root.size() > kMaxTokenEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", root.size(), " entries exceed the limit of ",
                     kMaxTokenEntries));
  }
  std::vector<Tenant> tenants;
  std::vector<TenantSet::Token> tokens;
  std::vector<size_t> entry_of;             // token -> entry index
  std::map<std::string, size_t> first_of;   // tenant -> entry index
  std::map<std::string, size_t> tenant_at;  // tenant -> tenants index
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node node = root[i];
    auto entry = ParseEntry(node);
    if (!entry.ok()) {
      const YAML::Node& read = node;
      const std::string tenant =
          read.IsMap() && read["tenant"].IsScalar()
              ? text::Printable(read["tenant"].Scalar(), 64)
              : "";
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", EntryName(i, tenant, node), ": ",
                       entry.status().message()));
    }
    const std::string& name = entry->tenant.name;
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (CRYPTO_memcmp(tokens[t].digest.data(), entry->digest.data(),
                        entry->digest.size()) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", EntryName(i, name, node),
            ": sha256: the same token as entry ", entry_of[t] + 1, " (tenant '",
            tenants[tokens[t].tenant].name, "'); each token is listed once"));
      }
    }
    if (const auto it = tenant_at.find(name); it != tenant_at.end()) {
      const std::string field =
          Disagreement(tenants[it->second], entry->tenant);
      if (!field.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", EntryName(i, name, node), ": ", field,
            " differs from entry ", first_of[name] + 1,
            " of the same tenant; a tenant's entries agree on everything "
            "but sha256"));
      }
      tokens.push_back({entry->digest, it->second});
      entry_of.push_back(i);
      continue;
    }
    first_of[name] = i;
    tenant_at[name] = tenants.size();
    tokens.push_back({entry->digest, tenants.size()});
    entry_of.push_back(i);
    tenants.push_back(std::move(entry->tenant));
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": lists no token; add one with mesa-anyjev tokens add"));
  }
  return std::make_shared<const TenantSet>(std::move(tenants),
                                           std::move(tokens));
}

}  // namespace

TokenDigest DigestOf(std::string_view token) {
  TokenDigest out{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(),
         out.data());
  return out;
}

const Tenant* TenantSet::Find(std::string_view name) const {
  for (const Tenant& tenant : tenants_) {
    if (tenant.name == name) return &tenant;
  }
  return nullptr;
}

const Tenant* TenantSet::Match(const TokenDigest& digest) const {
  const Tenant* found = nullptr;
  for (const Token& token : tokens_) {
    // No early exit: every entry costs the same.
    if (CRYPTO_memcmp(token.digest.data(), digest.data(), digest.size()) == 0) {
      found = &tenants_[token.tenant];
    }
  }
  return found;
}

absl::StatusOr<std::shared_ptr<const TenantSet>> ParseTokensFile(
    const std::string& text, const std::string& where) {
  ASSIGN_OR_RETURN(const std::optional<YAML::Node> document,
                   config::ParseOneYamlDocument(text, where));
  if (!document.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": lists no token; add one with mesa-anyjev tokens add"));
  }
  // yaml-cpp reports misuse by exception too; none may escape.
  try {
    return FromDocument(*document, where);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", e.what()));
  }
}

absl::StatusOr<std::shared_ptr<const TenantSet>> ReadTokensFile(
    const std::string& path, const std::string& key) {
  const std::string where = absl::StrCat(key, " (", path, ")");
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: mode %04o; it must be readable by its owner only (chmod 600)",
        where, info.st_mode & 07777));
  }
  auto text = util::ReadFile(
      path, {.max_bytes = kMaxTokensFileBytes, .limit_name = "1 MiB"});
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", text.status().message()));
  }
  return ParseTokensFile(*text, where);
}

std::shared_ptr<const TenantSet> SingleTokenSet(std::string_view token) {
  Tenant tenant;
  tenant.name = kLegacyTenant;
  tenant.role = Role::kAdmin;
  return std::make_shared<const TenantSet>(
      std::vector<Tenant>{std::move(tenant)},
      std::vector<TenantSet::Token>{{DigestOf(token), 0}});
}

std::string EntryText(const Tenant& tenant, const TokenDigest& digest,
                      std::string_view created) {
  std::string hex;
  for (unsigned char byte : digest) absl::StrAppendFormat(&hex, "%02x", byte);
  // Quoted: a name such as "null" or "yes" stays a string to YAML.
  std::string out =
      absl::StrCat("- tenant: \"", tenant.name, "\"\n  sha256: ", hex,
                   "\n  role: ", RoleName(tenant.role), "\n");
  if (tenant.weight != 1.0) {
    absl::StrAppend(&out, "  weight: ", FormatNumber(tenant.weight), "\n");
  }
  if (tenant.max_queued_calls != 0) {
    absl::StrAppend(&out, "  max_queued_calls: ", tenant.max_queued_calls,
                    "\n");
  }
  if (tenant.max_queued_tokens != 0) {
    absl::StrAppend(&out, "  max_queued_tokens: ", tenant.max_queued_tokens,
                    "\n");
  }
  if (tenant.priority.has_value()) {
    absl::StrAppend(&out, "  priority: ", PriorityName(*tenant.priority), "\n");
  }
  if (tenant.max_priority != Priority::kInteractive) {
    absl::StrAppend(&out, "  max_priority: ", PriorityName(tenant.max_priority),
                    "\n");
  }
  if (!created.empty()) {
    absl::StrAppend(&out, "  created: ", std::string(created), "\n");
  }
  return out;
}

}  // namespace mesa_anyjev::auth
