// Roles, classes and tenant names (see tenant.h).
#include "common/auth/tenant.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::auth {
namespace {

constexpr util::EnumName<Role> kRoleNames[] = {{Role::kDecide, "decide"},
                                               {Role::kLearn, "learn"},
                                               {Role::kAdmin, "admin"}};
static_assert(util::NamesEvery(kRoleNames, Role::kAdmin));

constexpr size_t kMaxTenantName = 64;

}  // namespace

const char* RoleName(Role role) { return util::NameIn(kRoleNames, role); }
std::optional<Role> ParseRole(std::string_view name) {
  return util::ValueIn(kRoleNames, name);
}
std::string RoleNames() { return util::NamesIn(kRoleNames); }

absl::Status CheckTenantName(std::string_view name) {
  const bool ok =
      !name.empty() && name.size() <= kMaxTenantName && name[0] != '.' &&
      name[0] != '-' && std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
      });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("a tenant name is 1..", kMaxTenantName,
                   " of [A-Za-z0-9._-], not starting with '.' or '-'"));
}

Priority Tenant::Resolve(std::optional<Priority> asked) const {
  const Priority wanted =
      asked.value_or(priority.value_or(Priority::kInteractive));
  // A larger value is less urgent: the cap is the larger of the two.
  return std::max(wanted, max_priority);
}

bool Tenant::Caps(std::optional<Priority> asked) const {
  return asked.has_value() && Resolve(asked) != *asked;
}

}  // namespace mesa_anyjev::auth
