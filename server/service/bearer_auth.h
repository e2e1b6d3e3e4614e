// Optional bearer-token check on every Inference call. Works on plaintext and
// TLS ports alike (gRPC's AuthMetadataProcessor needs secure credentials).
// The token is compared in constant time and never logged.
#pragma once

#include <grpcpp/server_context.h>

#include <array>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace mesa_anyjev::service {

class BearerAuth {
 public:
  // nullopt = auth off: every call passes.
  explicit BearerAuth(const std::optional<std::string>& token);

  bool enabled() const { return enabled_; }
  // OK, or UNAUTHENTICATED with a reason that never echoes what was sent.
  absl::Status Check(const grpc::ServerContextBase& context) const;

 private:
  bool enabled_ = false;
  // SHA-256 of the token: comparing digests hides the token's length too.
  std::array<unsigned char, 32> digest_{};
};

}  // namespace mesa_anyjev::service
