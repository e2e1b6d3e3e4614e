// A Qwen3 checkpoint loaded for the engine: its tokenizer and chat template
// (from tokenizer.json and the template the checkpoint names) and the model
// runner that owns its weights on the device (server/model/model_runner.h),
// with the identity and capabilities the services report and the pass
// loop's options. libtorch stays on the runner's side.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/text/bpe_tokenizer.h"
#include "server/engine/pass_loop.h"
#include "server/engine/queued_backend.h"
#include "server/model/model_runner.h"

namespace mesa_anyjev::engine {

struct CheckpointModel {
  std::unique_ptr<text::BpeTokenizer> tokenizer;
  text::ChatTemplate chat_template = text::ChatTemplate::None();
  std::unique_ptr<model::ModelRunner> runner;
  ModelIdentity identity;
  Capabilities capabilities;

  ServedModel Served() const;
  PassLoopOptions LoopOptions(const config::EngineConfig& engine) const;
};

// Loads `model.path` (tokenizer.json, the chat template, config.json and
// the weights); a checkpoint whose chat template we do not render exactly,
// or whose model does not load (model_runner.h), is one line saying why.
absl::StatusOr<std::unique_ptr<CheckpointModel>> LoadCheckpoint(
    const config::ModelConfig& model, const config::EngineConfig& engine);

}  // namespace mesa_anyjev::engine
