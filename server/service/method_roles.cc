// The role table (see method_roles.h).
#include "server/service/method_roles.h"

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::service {

using auth::Role;
using metrics::Method;

Role RequiredRole(Method method) {
  switch (method) {
    case Method::kGetModelInfo:
    case Method::kTokenize:
    case Method::kLogprobs:
    case Method::kHiddenStates:
    case Method::kDecide:
    case Method::kExportArtifacts:
    case Method::kListQuestions:
    case Method::kListBundles:
    case Method::kGetBundle:
      return Role::kDecide;
    case Method::kFit:
    case Method::kLoadArtifacts:
    case Method::kResetPriors:
    case Method::kPutBundle:
    case Method::kPutAgreement:
      return Role::kLearn;
    case Method::kPromoteBundle:
    case Method::kRollbackBundle:
    case Method::kCount:
      break;
  }
  return Role::kAdmin;  // and any method added without a row
}

absl::Status Authorize(Method method, const CallerIdentity& caller) {
  const Role needed = RequiredRole(method);
  if (caller.role() >= needed) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(metrics::MethodName(method), " needs role ",
                   auth::RoleName(needed), "; tenant '", caller.tenant_name(),
                   "' has role ", auth::RoleName(caller.role())));
}

}  // namespace mesa_anyjev::service
