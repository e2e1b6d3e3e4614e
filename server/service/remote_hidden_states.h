// The router's hidden states (issue 8): a mesa-anyjevd holding the local
// model, over gRPC (Inference.HiddenStates). Prompt groups arrive as ids of
// the router's tokenizer and travel as text, which the remote daemon
// tokenizes itself; Create refuses a daemon whose tokenizer gives any label
// another id, as the reference's composite does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/composite_backend.h"
#include "common/config/config.h"
#include "common/text/tokenizer.h"

namespace grpc {
class Channel;
}

namespace mesa_anyjev::service {

class RemoteHiddenStates : public HiddenStatesSource {
 public:
  // Connects to `client.address` (one daemon, a list, or a dns:/// name),
  // reads its model info and checks the label ids against `prompts`, which
  // must outlive this object.
  static absl::StatusOr<std::unique_ptr<RemoteHiddenStates>> Create(
      const config::ClientConfig& client, const text::Tokenizer& prompts);

  const ModelIdentity& identity() const override { return identity_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;

 private:
  RemoteHiddenStates(std::shared_ptr<grpc::Channel> channel,
                     std::optional<std::string> token,
                     const text::Tokenizer& prompts, int32_t affinity_bytes)
      : channel_(std::move(channel)),
        token_(std::move(token)),
        prompts_(prompts),
        affinity_bytes_(affinity_bytes) {}

  std::shared_ptr<grpc::Channel> channel_;
  std::optional<std::string> token_;
  const text::Tokenizer& prompts_;
  int32_t affinity_bytes_;
  ModelIdentity identity_;
  Capabilities capabilities_;
};

}  // namespace mesa_anyjev::service
