// Tenants and roles (docs/operations.md, "Tenants and roles"): who a call is
// for, what it may do, and the priority class and share of the engine its
// work gets. Plain data, read from the tokens file (tokens_file.h) by the
// daemon and written by the CLI's `tokens add`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/backend.h"

namespace mesa_anyjev::auth {

// The call metadata that asks for a priority class (docs/rpc.md):
// "interactive" or "batch"; without it, the tenant's default.
inline constexpr char kPriorityMetadata[] = "mesa-anyjev-priority";

// Roles nest: each may do what the one before it may, and more.
//   decide  read the model and what it serves (Decide, Logprobs, ...)
//   learn   also change what is learned (Fit, LoadArtifacts, Bundles.Put,
//           ResetPriors of its own priors)
//   admin   also change what is served (Bundles.Promote, Bundles.Rollback)
enum class Role { kDecide = 0, kLearn = 1, kAdmin = 2 };

const char* RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);
std::string RoleNames();  // "decide, learn or admin", for messages

// The classes' names: PriorityName, PriorityNamed (common/backend.h).

// A tenant name: 1..64 of [A-Za-z0-9._-], not starting with '.' or '-'
// (it is a metric label and a log word). INVALID_ARGUMENT naming the rule.
absl::Status CheckTenantName(std::string_view name);

struct Tenant {
  std::string name;
  Role role = Role::kDecide;
  // Its share of the engine against other tenants with work queued, in
  // proportion to the weights (> 0).
  double weight = 1.0;
  // Calls and prompt tokens it may keep queued; 0: the engine's default.
  int64_t max_queued_calls = 0;
  int64_t max_queued_tokens = 0;
  // The class of a call that asks for none (none: interactive).
  std::optional<Priority> priority;
  // The most urgent class it is served at: batch serves every call of the
  // tenant as batch, whatever it asks.
  Priority max_priority = Priority::kInteractive;

  bool MayDo(Role needed) const { return role >= needed; }
  // The class a call runs at: `asked`, else the tenant's default, else
  // interactive, never more urgent than max_priority.
  Priority Resolve(std::optional<Priority> asked) const;
  // Whether Resolve(asked) is less urgent than `asked`.
  bool Caps(std::optional<Priority> asked) const;
};

}  // namespace mesa_anyjev::auth
