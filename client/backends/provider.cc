// The Provider interface's default answers for what a provider cannot do.
#include "client/backends/provider.h"

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::client {

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
Provider::DecideCall(const std::vector<std::string>&,
                     const std::vector<decision::Question>&, decision::Level) {
  return absl::UnimplementedError(
      absl::StrCat("the ", info().kind, " provider cannot decide a span"));
}

absl::StatusOr<int> Provider::LoadArtifacts(const nlohmann::ordered_json&) {
  return absl::FailedPreconditionError(
      "this backend's bundles are loaded by the daemon (learn promote "
      "--backend hf)");
}

absl::StatusOr<nlohmann::ordered_json> Provider::FitArtifact(
    const decision::Question&, const std::vector<std::string>&,
    const std::vector<int>&, decision::Level) {
  return absl::UnimplementedError(
      absl::StrCat("the ", info().kind, " provider cannot fit artifacts"));
}

absl::StatusOr<std::vector<decision::Decision>> Provider::DecideWith(
    const nlohmann::ordered_json&, const std::vector<std::string>&,
    const decision::Question&, decision::Level) {
  return absl::UnimplementedError(absl::StrCat(
      "the ", info().kind, " provider cannot decide with scratch artifacts"));
}

}  // namespace mesa_anyjev::client
