#include "server/engine/checkpoint_model.h"

#include <filesystem>

#include "common/status/status_macros.h"

namespace mesa_anyjev::engine {

ServedModel CheckpointModel::Served() const {
  const model::ModelRunner* r = runner.get();
  return {identity,
          capabilities,
          tokenizer.get(),
          &chat_template,
          [r] { return r->device_memory(); },
          r->device_info()};
}

PassLoopOptions CheckpointModel::LoopOptions(
    const config::EngineConfig& engine) const {
  PassLoopOptions options;
  options.kv = runner->kv();
  options.prefix_caching = engine.prefix_caching;
  options.batch_tokens = engine.batch_tokens;
  options.interactive_pass_tokens = engine.interactive_pass_tokens;
  options.short_passes_after_interactive =
      engine.short_passes_after_interactive;
  options.n_layers = capabilities.n_layers;
  options.hidden_size = capabilities.hidden_size;
  options.vocab_size = capabilities.vocab_size;
  return options;
}

absl::StatusOr<std::unique_ptr<CheckpointModel>> LoadCheckpoint(
    const config::ModelConfig& config, const config::EngineConfig& engine) {
  auto m = std::make_unique<CheckpointModel>();
  const std::filesystem::path dir(config.path);
  ASSIGN_OR_RETURN(m->chat_template,
                   text::ChatTemplate::FromFile(dir.string()));
  ASSIGN_OR_RETURN(m->tokenizer, text::BpeTokenizer::FromFile(
                                     (dir / "tokenizer.json").string()));
  ASSIGN_OR_RETURN(m->runner, model::ModelRunner::Load(config, engine));
  const model::RunnerPaths& paths = m->runner->paths();
  const model::ModelShape& shape = m->runner->shape();
  ModelIdentity& id = m->identity;
  id.name = config.name.empty() ? dir.filename().string() : config.name;
  if (id.name.empty()) id.name = dir.parent_path().filename().string();
  id.identity = shape.fingerprint;
  id.dtype = config.dtype;
  id.device = paths.device_name;
  id.attention = paths.AttentionLine();
  Capabilities& caps = m->capabilities;
  caps.hidden_states = true;
  caps.early_stop = true;
  caps.max_choice_k = kMaxChoiceOptions;
  caps.n_layers = shape.n_layers;
  caps.hidden_size = shape.hidden_size;
  caps.vocab_size = shape.vocab_size;
  return m;
}

}  // namespace mesa_anyjev::engine
