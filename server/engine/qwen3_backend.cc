#include "server/engine/qwen3_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/bpe_tokenizer.h"
#include "server/engine/prefix_cache.h"
#include "server/model/qwen3_loader.h"

namespace mesa_anyjev::engine {
namespace {

struct Prompt {
  std::vector<TokenId>
      ids;         // what the forward runs: a suffix, or a whole prompt
  size_t row = 0;  // index among all prompts (groups, then suffixes)
  size_t group = 0;
  size_t index = 0;  // suffix index within the group
};

// Batches of prompt indices, longest first, each under `budget` tokens once
// padded (a single longer prompt forms a batch of its own). With `lead`, the
// first batch also holds an extension row no longer than its longest prompt.
std::vector<std::vector<size_t>> Batches(const std::vector<Prompt>& prompts,
                                         int64_t budget, bool lead = false) {
  std::vector<size_t> order(prompts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return prompts[a].ids.size() > prompts[b].ids.size();
  });
  std::vector<std::vector<size_t>> batches;
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(prompts[i].ids.size());
    const size_t extra = lead && batches.size() == 1 ? 1 : 0;
    if (batches.empty() ||
        static_cast<int64_t>(batches.back().size() + 1 + extra) *
                static_cast<int64_t>(
                    prompts[batches.back().front()].ids.size()) >
            std::max(budget, len)) {
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

at::Tensor Row(const std::vector<TokenId>& ids, at::Device device) {
  return at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong)
      .view({1, -1})
      .to(device);
}

}  // namespace

struct Qwen3Backend::State {
  std::unique_ptr<text::BpeTokenizer> tokenizer;
  text::ChatTemplate chat_template = text::ChatTemplate::None();
  std::unique_ptr<model::Qwen3Model> model;
  std::unique_ptr<PrefixCache> cache;
  EngineObserver* observer = nullptr;
  int64_t batch_tokens = 8192;

  // Right-padded [B, T] int64 tokens and lengths of the prompts in `batch`,
  // after `extension` as row 0 when there is one.
  model::ForwardRequest Request(const std::vector<Prompt>& prompts,
                                const std::vector<size_t>& batch,
                                const std::vector<TokenId>* extension) const {
    std::vector<const std::vector<TokenId>*> rows;
    if (extension != nullptr) rows.push_back(extension);
    for (size_t i : batch) rows.push_back(&prompts[i].ids);
    model::ForwardRequest request;
    int64_t t = 0;
    for (const auto* ids : rows) {
      t = std::max<int64_t>(t, static_cast<int64_t>(ids->size()));
    }
    at::Tensor tokens =
        at::zeros({static_cast<int64_t>(rows.size()), t}, at::kLong);
    auto acc = tokens.accessor<int64_t, 2>();
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t c = 0; c < rows[r]->size(); ++c) acc[r][c] = (*rows[r])[c];
      request.lengths.push_back(static_cast<int64_t>(rows[r]->size()));
    }
    request.tokens = tokens.to(model->device());
    request.extends_prefix = extension != nullptr;
    return request;
  }

  // Runs every prompt of `groups` through `depth` blocks and hands each
  // forward's rows to `emit(prompt, result, row)`. A group's prefix runs once
  // and its suffixes attend to it; prompts without a prefix, or whose suffix
  // is empty, run whole.
  template <typename Emit>
  absl::Status Run(const std::vector<PromptGroup>& groups,
                   const model::ForwardRequest& shape, int32_t depth,
                   const CallControl& control, Emit emit) {
    std::vector<Prompt> whole;
    size_t row = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      const PromptGroup& group = groups[g];
      std::vector<Prompt> shared;
      for (size_t s = 0; s < group.suffixes.size(); ++s, ++row) {
        Prompt p{group.suffixes[s], row, g, s};
        if (group.prefix.empty() || group.suffixes[s].empty()) {
          p.ids.insert(p.ids.begin(), group.prefix.begin(), group.prefix.end());
          whole.push_back(std::move(p));
        } else {
          shared.push_back(std::move(p));
        }
      }
      if (shared.empty()) continue;
      RETURN_IF_ERROR(
          RunGroup(group.prefix, shared, shape, depth, control, emit));
    }
    for (const auto& batch : Batches(whole, batch_tokens)) {
      RETURN_IF_ERROR(Forward(whole, batch, shape, nullptr, nullptr, nullptr,
                              control, emit));
    }
    return absl::OkStatus();
  }

  // A group's suffixes after its prefix. The longest cached part of the
  // prefix is reused. The rest runs as an extension row in the first suffix
  // batch's own pass when it is no longer than the longest suffix (so padding
  // stays bounded) and that row fits the batch budget beside it, else in a
  // prefill pass of its own; either way the whole prefix is cached for the
  // next caller.
  template <typename Emit>
  absl::Status RunGroup(const std::vector<TokenId>& prefix,
                        const std::vector<Prompt>& shared,
                        const model::ForwardRequest& shape, int32_t depth,
                        const CallControl& control, Emit& emit) {
    if (control.ShouldStop(absl::Now())) return Stopped(control);
    std::optional<model::PrefixState> hit = cache->Lookup(prefix, depth);
    const model::PrefixState* past = hit.has_value() ? &*hit : nullptr;
    const int64_t reused = hit.has_value() ? hit->length : 0;
    const std::vector<TokenId> rest(prefix.begin() + reused, prefix.end());
    size_t longest = 0;
    for (const Prompt& p : shared) longest = std::max(longest, p.ids.size());
    const bool lead = !rest.empty() && rest.size() <= longest &&
                      2 * static_cast<int64_t>(longest) <= batch_tokens;
    const auto batches = Batches(shared, batch_tokens, lead);
    size_t next = 0;
    model::PrefixState state;
    if (!rest.empty()) {
      if (lead) {
        RETURN_IF_ERROR(Forward(shared, batches[0], shape, past, &rest, &state,
                                control, emit));
        next = 1;
      } else {
        const absl::Time start = absl::Now();
        state = model->Prefill(Row(rest, model->device()), depth, past);
        if (observer != nullptr) {
          observer->OnBatch(1, static_cast<int64_t>(rest.size()),
                            absl::Now() - start);
        }
      }
      cache->Insert(prefix, state);
      past = &state;
    }
    for (; next < batches.size(); ++next) {
      RETURN_IF_ERROR(Forward(shared, batches[next], shape, past, nullptr,
                              nullptr, control, emit));
    }
    return absl::OkStatus();
  }

  // One pass over `batch` after `prefix`, with `extension` (recorded in
  // `record`) as row 0 when given.
  template <typename Emit>
  absl::Status Forward(const std::vector<Prompt>& prompts,
                       const std::vector<size_t>& batch,
                       const model::ForwardRequest& shape,
                       const model::PrefixState* prefix,
                       const std::vector<TokenId>* extension,
                       model::PrefixState* record, const CallControl& control,
                       Emit& emit) {
    if (control.ShouldStop(absl::Now())) return Stopped(control);
    model::ForwardRequest request = Request(prompts, batch, extension);
    request.layers = shape.layers;
    request.final_norm = shape.final_norm;
    const absl::Time start = absl::Now();
    const model::ForwardResult result = model->Forward(request, prefix, record);
    int64_t tokens = 0;
    for (int64_t len : request.lengths) tokens += len;
    for (size_t r = 0; r < batch.size(); ++r) {
      emit(prompts[batch[r]], result, static_cast<int64_t>(r));
    }
    if (observer != nullptr) {
      observer->OnBatch(static_cast<int64_t>(request.lengths.size()), tokens,
                        absl::Now() - start);
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<Qwen3Backend>> Qwen3Backend::Load(
    const config::ModelConfig& config, const config::EngineConfig& engine,
    EngineObserver* observer) {
  const std::filesystem::path dir(config.path);
  auto state = std::make_unique<State>();
  // A checkpoint whose chat template we do not render exactly is refused.
  ASSIGN_OR_RETURN(state->chat_template,
                   text::ChatTemplate::FromFile(dir.string()));
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
  ASSIGN_OR_RETURN(options.gemm, model::ParseCpuGemm(config.cpu_gemm));
  ASSIGN_OR_RETURN(model::LoadedQwen3 loaded,
                   model::LoadQwen3(config.path, options));
  state->model = std::move(loaded.model);
  state->cache =
      std::make_unique<PrefixCache>(engine.prefix_cache_bytes, observer);
  state->observer = observer;
  state->batch_tokens = engine.batch_tokens;

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
  const model::Qwen3Model& m = *backend->state_->model;
  backend->gemm_ = model::CpuGemmName(m.gemm());
  std::string why;
  if (options.gemm == model::CpuGemm::kOneDnn && m.device().is_cpu() &&
      m.dtype() == at::kFloat && !model::OneDnnLinearWorks(&why)) {
    backend->gemm_ += " (" + why + ")";
  }
  return backend;
}

Qwen3Backend::Qwen3Backend(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

Qwen3Backend::~Qwen3Backend() = default;

const text::Tokenizer& Qwen3Backend::tokenizer() const {
  return *state_->tokenizer;
}

const text::ChatTemplate& Qwen3Backend::chat_template() const {
  return state_->chat_template;
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Qwen3Backend::Logprobs(
    const std::vector<PromptGroup>& groups, int32_t top_k,
    const CallControl& control) {
  c10::InferenceMode guard;
  std::vector<std::vector<PromptLogprobs>> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    out[g].resize(groups[g].suffixes.size());
  }
  model::ForwardRequest shape;
  shape.final_norm = true;
  const int32_t n = capabilities_.n_layers;
  // lm_head only at the last position of each prompt, once per batch (rows
  // arrive in order, starting at 0).
  at::Tensor batch_logprobs;
  auto emit = [&](const Prompt& p, const model::ForwardResult& result,
                  int64_t r) {
    if (r == 0) batch_logprobs = state_->model->LogSoftmax(result.final).cpu();
    const at::Tensor logprobs = batch_logprobs[r];
    const float* values = logprobs.data_ptr<float>();
    PromptLogprobs& dst = out[p.group][p.index];
    for (TokenId id : groups[p.group].label_ids) {
      dst.label_logprobs.push_back(values[id]);
    }
    if (top_k > 0) {
      const auto [top_values, top_ids] = logprobs.topk(top_k);
      const auto values_k = top_values.accessor<float, 1>();
      const auto ids_k = top_ids.accessor<int64_t, 1>();
      for (int64_t k = 0; k < top_k; ++k) {
        dst.top.push_back({static_cast<TokenId>(ids_k[k]), values_k[k]});
      }
    }
    dst.n_tokens =
        static_cast<int32_t>(groups[p.group].prefix.size() +
                             groups[p.group].suffixes[p.index].size());
  };
  RETURN_IF_ERROR(state_->Run(groups, shape, n, control, emit));
  return out;
}

absl::StatusOr<HiddenStatesResult> Qwen3Backend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  c10::InferenceMode guard;
  HiddenStatesResult out;
  out.layers = layers;
  for (const PromptGroup& group : groups) {
    out.n_prompts += static_cast<int32_t>(group.suffixes.size());
  }
  out.hidden_size = capabilities_.hidden_size;
  const size_t row_values =
      layers.size() * static_cast<size_t>(out.hidden_size);
  out.values.resize(static_cast<size_t>(out.n_prompts) * row_values);
  model::ForwardRequest shape;
  shape.layers = layers;
  // Early stop: the forward (and the prefix) run only as deep as needed.
  int32_t depth = 0;
  for (int32_t layer : layers) depth = std::max(depth, layer);
  at::Tensor batch_hidden;
  auto emit = [&](const Prompt& p, const model::ForwardResult& result,
                  int64_t r) {
    // One device-to-host copy per batch: [B, L, H].
    if (r == 0) batch_hidden = result.hidden.cpu().contiguous();
    const at::Tensor hidden = batch_hidden[r];  // [L, H], contiguous
    std::memcpy(out.values.data() + p.row * row_values,
                hidden.data_ptr<float>(), row_values * sizeof(float));
  };
  RETURN_IF_ERROR(state_->Run(groups, shape, depth, control, emit));
  return out;
}

std::optional<DeviceMemory> Qwen3Backend::device_memory() const {
  const at::Device device = state_->model->device();
  if (!device.is_cuda()) return std::nullopt;
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  constexpr auto kAll =
      static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return DeviceMemory{stats.allocated_bytes[kAll].current,
                      stats.reserved_bytes[kAll].current};
}

}  // namespace mesa_anyjev::engine
