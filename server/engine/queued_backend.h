// The Backend the daemon serves: the model's facts (identity, capabilities,
// tokenizer, chat template, device) as loaded, and its Logprobs and
// HiddenStates as engine jobs, each queued with the others (skipped when
// its deadline passed or its caller cancelled, planned into passes with
// other callers' work) while the calling thread waits for its output. The
// decision engine runs on a worker of its own over it, so the one engine
// thread stays the only thread that touches the model and no gRPC thread
// blocks on it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/backend.h"
#include "server/engine/engine.h"

namespace mesa_anyjev::engine {

// What the services read of the model the engine serves. The pointers
// outlive the Backend that reads them.
struct ServedModel {
  ModelIdentity identity;
  Capabilities capabilities;
  const text::Tokenizer* tokenizer = nullptr;
  const text::ChatTemplate* chat_template = nullptr;
  std::function<std::optional<DeviceMemory>()> device_memory;
  std::optional<DeviceInfo> device_info;

  // The facts of a model with the Backend seam (the fake, the composite).
  static ServedModel Of(const Backend& backend);
};

class QueuedBackend final : public Backend {
 public:
  // `engine` outlives the adapter.
  QueuedBackend(ServedModel model, Engine* engine)
      : model_(std::move(model)), engine_(engine) {}

  const ModelIdentity& identity() const override { return model_.identity; }
  const Capabilities& capabilities() const override {
    return model_.capabilities;
  }
  const text::Tokenizer& tokenizer() const override {
    return *model_.tokenizer;
  }
  const text::ChatTemplate& chat_template() const override {
    return *model_.chat_template;
  }
  // Blocks the caller until the engine has run (or dropped) the job; a
  // refusal (a limit, a drain) comes back at once.
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override;
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;
  std::optional<DeviceMemory> device_memory() const override {
    return model_.device_memory ? model_.device_memory() : std::nullopt;
  }
  std::optional<DeviceInfo> device_info() const override {
    return model_.device_info;
  }

 private:
  ServedModel model_;
  Engine* const engine_;
};

}  // namespace mesa_anyjev::engine
