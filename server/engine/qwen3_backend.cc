#include "server/engine/qwen3_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/bpe_tokenizer.h"
#include "server/model/qwen3_loader.h"

namespace mesa_anyjev::engine {
namespace {

// Tokens per forward batch (rows x padded length). TODO(issue 4): the engine
// forms batches under a configured token budget and shares prefixes.
constexpr int64_t kBatchTokens = 8192;

struct Prompt {
  std::vector<TokenId> ids;
  size_t group = 0;
  size_t index = 0;  // suffix index within the group
};

std::vector<Prompt> Flatten(const std::vector<PromptGroup>& groups) {
  std::vector<Prompt> prompts;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t s = 0; s < groups[g].suffixes.size(); ++s) {
      Prompt p;
      p.ids = groups[g].prefix;
      p.ids.insert(p.ids.end(), groups[g].suffixes[s].begin(),
                   groups[g].suffixes[s].end());
      p.group = g;
      p.index = s;
      prompts.push_back(std::move(p));
    }
  }
  return prompts;
}

// Batches of prompt indices, longest first, each under kBatchTokens once
// padded (a single longer prompt forms a batch of its own).
std::vector<std::vector<size_t>> Batches(const std::vector<Prompt>& prompts) {
  std::vector<size_t> order(prompts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return prompts[a].ids.size() > prompts[b].ids.size();
  });
  std::vector<std::vector<size_t>> batches;
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(prompts[i].ids.size());
    if (batches.empty() ||
        static_cast<int64_t>(batches.back().size() + 1) *
                static_cast<int64_t>(
                    prompts[batches.back().front()].ids.size()) >
            std::max(kBatchTokens, len)) {
      batches.emplace_back();
    }
    batches.back().push_back(i);
  }
  return batches;
}

absl::Status Stopped(const CallControl& control) {
  if (control.cancelled != nullptr && control.cancelled->load()) {
    return absl::CancelledError("the caller cancelled the call");
  }
  return absl::DeadlineExceededError("the deadline passed during the forward");
}

}  // namespace

struct Qwen3Backend::State {
  std::unique_ptr<text::BpeTokenizer> tokenizer;
  std::unique_ptr<model::Qwen3Model> model;

  // Right-padded [B, T] int64 tokens and lengths of the prompts in `batch`.
  model::ForwardRequest Request(const std::vector<Prompt>& prompts,
                                const std::vector<size_t>& batch) const {
    model::ForwardRequest request;
    int64_t t = 0;
    for (size_t i : batch) {
      t = std::max<int64_t>(t, static_cast<int64_t>(prompts[i].ids.size()));
    }
    at::Tensor tokens =
        at::zeros({static_cast<int64_t>(batch.size()), t}, at::kLong);
    auto acc = tokens.accessor<int64_t, 2>();
    for (size_t r = 0; r < batch.size(); ++r) {
      const auto& ids = prompts[batch[r]].ids;
      for (size_t c = 0; c < ids.size(); ++c) acc[r][c] = ids[c];
      request.lengths.push_back(static_cast<int64_t>(ids.size()));
    }
    request.tokens = tokens.to(model->device());
    return request;
  }
};

absl::StatusOr<std::unique_ptr<Qwen3Backend>> Qwen3Backend::Load(
    const config::ModelConfig& config) {
  const std::filesystem::path dir(config.path);
  auto state = std::make_unique<State>();
  ASSIGN_OR_RETURN(state->tokenizer, text::BpeTokenizer::FromFile(
                                         (dir / "tokenizer.json").string()));
  const int threads =
      config.threads > 0
          ? config.threads
          : static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(threads, 1));
  model::Qwen3LoadOptions options;
  options.dtype = config.dtype;
  options.device = config.device;
  ASSIGN_OR_RETURN(options.attention, model::ParseAttention(config.attention));
  ASSIGN_OR_RETURN(model::LoadedQwen3 loaded,
                   model::LoadQwen3(config.path, options));
  state->model = std::move(loaded.model);

  auto backend =
      std::unique_ptr<Qwen3Backend>(new Qwen3Backend(std::move(state)));
  const model::Qwen3Config& c = backend->state_->model->config();
  backend->identity_.name =
      config.name.empty() ? dir.filename().string() : config.name;
  if (backend->identity_.name.empty()) {
    backend->identity_.name = dir.parent_path().filename().string();
  }
  backend->identity_.identity = loaded.fingerprint;
  backend->identity_.dtype = config.dtype;
  backend->identity_.device = backend->state_->model->device().str();
  backend->identity_.attention =
      model::AttentionName(backend->state_->model->attention());
  backend->capabilities_.hidden_states = true;
  backend->capabilities_.early_stop = true;
  backend->capabilities_.max_choice_k = 26;
  backend->capabilities_.n_layers = static_cast<int32_t>(c.num_hidden_layers);
  backend->capabilities_.hidden_size = static_cast<int32_t>(c.hidden_size);
  backend->capabilities_.vocab_size = static_cast<int32_t>(c.vocab_size);
  backend->weight_bytes_ = loaded.weight_bytes;
  return backend;
}

Qwen3Backend::Qwen3Backend(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

Qwen3Backend::~Qwen3Backend() = default;

const text::Tokenizer& Qwen3Backend::tokenizer() const {
  return *state_->tokenizer;
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Qwen3Backend::Logprobs(
    const std::vector<PromptGroup>& groups, int32_t top_k,
    const CallControl& control) {
  c10::InferenceMode guard;
  const std::vector<Prompt> prompts = Flatten(groups);
  std::vector<std::vector<PromptLogprobs>> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    out[g].resize(groups[g].suffixes.size());
  for (const auto& batch : Batches(prompts)) {
    if (control.ShouldStop(absl::Now())) return Stopped(control);
    model::ForwardRequest request = state_->Request(prompts, batch);
    request.final_norm = true;
    const model::ForwardResult result = state_->model->Forward(request);
    const at::Tensor logprobs = state_->model->LogSoftmax(result.final).cpu();
    at::Tensor top_values, top_ids;
    if (top_k > 0) {
      std::tie(top_values, top_ids) = logprobs.topk(top_k, /*dim=*/-1);
    }
    for (size_t r = 0; r < batch.size(); ++r) {
      const Prompt& p = prompts[batch[r]];
      PromptLogprobs& dst = out[p.group][p.index];
      const at::Tensor row = logprobs[static_cast<int64_t>(r)];
      const float* values = row.data_ptr<float>();
      for (TokenId id : groups[p.group].label_ids) {
        dst.label_logprobs.push_back(values[id]);
      }
      for (int32_t k = 0; k < top_k; ++k) {
        dst.top.push_back({static_cast<TokenId>(top_ids[r][k].item<int64_t>()),
                           top_values[r][k].item<double>()});
      }
      dst.n_tokens = static_cast<int32_t>(p.ids.size());
    }
  }
  return out;
}

absl::StatusOr<HiddenStatesResult> Qwen3Backend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  c10::InferenceMode guard;
  const std::vector<Prompt> prompts = Flatten(groups);
  HiddenStatesResult out;
  out.layers = layers;
  out.n_prompts = static_cast<int32_t>(prompts.size());
  out.hidden_size = capabilities_.hidden_size;
  const size_t row_values =
      layers.size() * static_cast<size_t>(out.hidden_size);
  out.values.resize(prompts.size() * row_values);
  for (const auto& batch : Batches(prompts)) {
    if (control.ShouldStop(absl::Now())) return Stopped(control);
    model::ForwardRequest request = state_->Request(prompts, batch);
    request.layers = layers;
    const at::Tensor hidden =
        state_->model->Forward(request).hidden.cpu().contiguous();  // [B, L, H]
    for (size_t r = 0; r < batch.size(); ++r) {
      // Flattened prompt order is group order then suffix order.
      std::memcpy(out.values.data() + batch[r] * row_values,
                  hidden[static_cast<int64_t>(r)].data_ptr<float>(),
                  row_values * sizeof(float));
    }
  }
  return out;
}

}  // namespace mesa_anyjev::engine
