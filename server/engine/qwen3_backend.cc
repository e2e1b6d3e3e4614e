#include "server/engine/qwen3_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/bpe_tokenizer.h"
#include "common/text/utf8.h"
#include "common/util/meminfo.h"
#include "server/engine/cpu_paths.h"
#include "server/engine/host_block_cache.h"
#include "server/engine/kv_blocks.h"
#include "server/engine/pass_planner.h"
#include "server/model/device_probe.h"
#include "server/model/memory_fit.h"
#include "server/model/qwen3_loader.h"

namespace mesa_anyjev::engine {
namespace {

// The load's memory check (memory_fit.h): what stays once loaded, against
// MemAvailable where the device's memory is the system's, else against the
// device's free memory.
absl::Status CheckMemoryFits(const model::Qwen3Config& c,
                             const std::string& dtype,
                             const config::EngineConfig& engine,
                             const model::DeviceFacts& device) {
  const int64_t element = dtype == "bfloat16" ? 2 : 4;
  const int64_t params = c.ParameterCount();
  model::MemoryPlan plan;
  plan.weights = params > std::numeric_limits<int64_t>::max() / element
                     ? std::numeric_limits<int64_t>::max()
                     : params * element;
  plan.kv_pool = engine.kv_pool_bytes;
  plan.host_cache = device.device == "cpu" ? engine.host_cache_bytes : 0;
  plan.reserve = engine.memory_reserve_bytes;
  int64_t available = 0;
  if (device.shared_memory) {
    ASSIGN_OR_RETURN(available, util::ReadMemAvailable());
  }
  return model::CheckMemoryFits(plan, device, available);
}

// What an exception from libtorch says, for a status: c10::Error's what()
// carries a C++ backtrace after its first line, which stays out of errors.
std::string FirstLine(const std::exception& e) {
  const std::string_view what = e.what();
  return text::Printable(what.substr(0, what.find('\n')), 400);
}

at::Tensor Longs(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::kLong).to(device);
}

}  // namespace

struct Qwen3Backend::State {
  std::unique_ptr<text::BpeTokenizer> tokenizer;
  text::ChatTemplate chat_template = text::ChatTemplate::None();
  std::unique_ptr<model::Qwen3Model> model;
  std::unique_ptr<KvBlocks> blocks;
  model::KvPool pool;
  EngineObserver* observer = nullptr;
  int64_t batch_tokens = 8192;
  int64_t block_bytes = 0;

  // Every prompt of `groups` through `depth` blocks, in passes packed by the
  // planner; after each pass `emit(ids, result)` gets the pass's result,
  // whose row r is output ids[r] (outputs numbered groups in order, then
  // suffixes).
  template <typename Emit>
  absl::Status Run(const std::vector<PromptGroup>& groups,
                   const std::vector<int32_t>& layers, bool final_norm,
                   int32_t depth, const CallControl& control, Emit emit) {
    // Owners: the callers of a merged call (control.parts), each dropped
    // alone when it stops; one owner otherwise.
    std::vector<PlanGroup> plan;
    int64_t outputs = 0;
    int32_t owner = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      while (static_cast<size_t>(owner + 1) < control.parts.size() &&
             control.parts[static_cast<size_t>(owner + 1)].first_group <= g) {
        ++owner;
      }
      plan.push_back({&groups[g], owner, outputs});
      outputs += static_cast<int64_t>(groups[g].suffixes.size());
    }
    auto live = [&control](int32_t who) {
      return control.parts.empty() ||
             !control.parts[static_cast<size_t>(who)].ShouldStop(absl::Now());
    };
    auto all_stopped = [&control]() { return control.ShouldStop(absl::Now()); };
    RETURN_IF_ERROR(PassPlanner::Check(plan, *blocks));
    PassPlanner planner(blocks.get(), plan, depth, batch_tokens);
    const int64_t evictions = blocks->evictions();
    absl::Status status = absl::OkStatus();
    const at::Device device = model->device();
    while (status.ok()) {
      if (all_stopped()) {
        status = control.StopStatus(absl::Now(), "the forward");
        break;
      }
      absl::StatusOr<Pass> pass = planner.Next(live);
      if (!pass.ok()) {
        status = pass.status();
        break;
      }
      if (pass->segments.empty()) break;
      const absl::Time start = absl::Now();
      std::vector<int64_t> tokens, positions, slots, rows, ids;
      std::vector<model::SegmentKeys> keys;
      for (const Segment& seg : pass->segments) {
        for (int64_t t = 0; t < seg.length; ++t) {
          tokens.push_back(seg.tokens[t]);
          positions.push_back(seg.start + t);
          slots.push_back(seg.keys[static_cast<size_t>(seg.start + t)]);
        }
        for (int64_t out : seg.outputs) {
          rows.push_back(static_cast<int64_t>(tokens.size()) - 1);
          ids.push_back(out);
        }
        keys.push_back(
            {seg.length, &seg.keys, seg.shared_id, seg.shared_length});
      }
      // libtorch reports errors (a device out of memory, say) as
      // exceptions; they end this call, never the daemon.
      try {
        const model::AttentionPlan attention(model->attention(), keys, device,
                                             model->dtype(), model->varlen());
        model::PackedPass packed;
        packed.tokens = Longs(tokens, device);
        packed.positions = Longs(positions, device);
        packed.slots = Longs(slots, device);
        packed.outputs = Longs(rows, device);
        if (!pass->copy_from.empty()) {
          packed.copy_from = Longs(pass->copy_from, device);
          packed.copy_to = Longs(pass->copy_to, device);
        }
        packed.attention = &attention;
        packed.layers = layers;
        packed.final_norm = final_norm;
        const model::ForwardResult result = model->Forward(packed, pool);
        planner.Finish(true);
        emit(ids, result);
      } catch (const std::exception& e) {
        // c10::Error, or std::bad_alloc: a short reason, no backtrace.
        planner.Finish(false);
        status = absl::InternalError(
            absl::StrCat("the forward pass failed: ", FirstLine(e)));
      }
      if (observer != nullptr) {
        observer->OnBatch(static_cast<int64_t>(pass->segments.size()),
                          pass->tokens, absl::Now() - start);
      }
    }
    if (observer != nullptr) {
      const PlanStats& stats = planner.stats();
      observer->OnPrefixLookups(stats.prefix_hits, stats.prefix_misses,
                                stats.reused_tokens);
      observer->OnPrefixEvictions(blocks->evictions() - evictions);
    }
    return status;
  }

  void ReportPool() const {
    if (observer == nullptr) return;
    observer->OnKvPool(blocks->referenced(), blocks->cached(),
                       blocks->num_blocks(), block_bytes);
  }
};

absl::StatusOr<std::unique_ptr<Qwen3Backend>> Qwen3Backend::Load(
    const config::ModelConfig& config, const config::EngineConfig& engine,
    EngineObserver* observer) {
  try {
    return LoadUnguarded(config, engine, observer);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loading the model on ", config.device, " in ", config.dtype,
        " failed: ", FirstLine(e),
        " (check model.device names a device this host has, that it has "
        "free memory for the weights and engine.kv_pool_bytes, and "
        "model.dtype)"));
  }
}

absl::StatusOr<std::unique_ptr<Qwen3Backend>> Qwen3Backend::LoadUnguarded(
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
  ASSIGN_OR_RETURN(const model::DeviceFacts device,
                   model::ProbeDevice(config.device));
  model::Qwen3LoadOptions options;
  options.dtype = config.dtype;
  options.device = config.device;
  options.before_weights = [&](const model::Qwen3Config& c) {
    return CheckMemoryFits(c, config.dtype, engine, device);
  };
  ASSIGN_OR_RETURN(options.attention, model::ParseAttention(config.attention));
  ASSIGN_OR_RETURN(options.gemm, model::ParseCpuGemm(config.cpu_gemm));
  ASSIGN_OR_RETURN(model::LoadedQwen3 loaded,
                   model::LoadQwen3(config.path, options));
  state->model = std::move(loaded.model);
  bool heap_kept = false;
  if (state->model->device().is_cpu()) {
    // A pass's activations on the CPU (tens of MB each) are over glibc's
    // mmap threshold, so each would be mapped, page-faulted in and unmapped
    // again, op after op. Keeping freed memory in the heap measured
    // 2,850-3,120 against 2,390 tokens/s for an 8192-token pass
    // (docs/model.md).
    heap_kept = KeepFreedHeap();
    // The largest (over 64 MiB) are mapped anew all the same when the
    // engine thread's arena is not the main one: those are kept here.
    if (engine.host_cache_bytes > 0) {
      InstallHostBlockCache(engine.host_cache_bytes);
    }
  }
  // The KV pool, allocated once: every pass's keys and values and the
  // prefix cache share it.
  const int64_t block_tokens = engine.kv_block_tokens;
  state->block_bytes = block_tokens * state->model->KvBytesPerToken();
  const int64_t num_blocks = engine.kv_pool_bytes / state->block_bytes;
  if (num_blocks < 1 ||
      num_blocks > std::numeric_limits<int32_t>::max() / block_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine.kv_pool_bytes: ", engine.kv_pool_bytes, " bytes hold ",
        num_blocks, " blocks of ", block_tokens, " tokens (",
        state->block_bytes,
        " bytes each for this model); give at least one block and fewer "
        "than 2^31 positions"));
  }
  state->blocks = std::make_unique<KvBlocks>(static_cast<int32_t>(num_blocks),
                                             static_cast<int32_t>(block_tokens),
                                             engine.prefix_caching);
  state->pool = state->model->NewKvPool(num_blocks * block_tokens);
  state->observer = observer;
  state->batch_tokens = engine.batch_tokens;
  state->ReportPool();

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
  if (backend->state_->model->varlen()) {
    backend->identity_.attention += " (varlen)";
  }
  backend->attention_note_ = loaded.varlen_why;
  backend->device_ = device;
  backend->capabilities_.hidden_states = true;
  backend->capabilities_.early_stop = true;
  backend->capabilities_.max_choice_k = kMaxChoiceOptions;
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
  } else if (!m.gemm_note().empty()) {
    backend->gemm_ += " (cpu_gemm auto: " + m.gemm_note() + ")";
  }
  if (m.device().is_cpu()) {
    backend->cpu_paths_ = DescribeCpuPaths(ChooseCpuPaths(
        at::TensorOptions(m.dtype()).device(m.device()), m.attention(),
        m.config().head_dim, heap_kept, engine.host_cache_bytes));
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
  // Nothing out of range may index a tensor, whoever called.
  RETURN_IF_ERROR(CheckPromptGroups(groups, capabilities_.vocab_size,
                                    /*check_labels=*/true));
  if (top_k < 0 || top_k > capabilities_.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_k: ", top_k, " is outside [0, ", capabilities_.vocab_size, "]"));
  }
  c10::InferenceMode guard;
  std::vector<std::vector<PromptLogprobs>> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    out[g].resize(groups[g].suffixes.size());
  }
  // Where each output lands: outputs are numbered groups, then suffixes.
  std::vector<std::pair<size_t, size_t>> where;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].suffixes.size(); ++i)
      where.push_back({g, i});
  }
  const int32_t n = capabilities_.n_layers;
  // lm_head only at the output rows, once per pass.
  auto emit = [&](const std::vector<int64_t>& ids,
                  const model::ForwardResult& result) {
    const at::Tensor logprobs = state_->model->LogSoftmax(result.final).cpu();
    at::Tensor top_values, top_ids;
    if (top_k > 0) std::tie(top_values, top_ids) = logprobs.topk(top_k);
    for (size_t r = 0; r < ids.size(); ++r) {
      const auto [g, i] = where[static_cast<size_t>(ids[r])];
      const float* values = logprobs[static_cast<int64_t>(r)].data_ptr<float>();
      PromptLogprobs& dst = out[g][i];
      for (TokenId id : groups[g].label_ids) {
        dst.label_logprobs.push_back(values[id]);
      }
      if (top_k > 0) {
        const at::Tensor row_values = top_values[static_cast<int64_t>(r)];
        const at::Tensor row_ids = top_ids[static_cast<int64_t>(r)];
        const auto values_k = row_values.accessor<float, 1>();
        const auto ids_k = row_ids.accessor<int64_t, 1>();
        for (int64_t k = 0; k < top_k; ++k) {
          dst.top.push_back({static_cast<TokenId>(ids_k[k]), values_k[k]});
        }
      }
      dst.n_tokens = static_cast<int32_t>(groups[g].prefix.size() +
                                          groups[g].suffixes[i].size());
    }
  };
  const absl::Status status =
      state_->Run(groups, {}, /*final_norm=*/true, n, control, emit);
  state_->ReportPool();
  RETURN_IF_ERROR(status);
  return out;
}

absl::StatusOr<HiddenStatesResult> Qwen3Backend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  RETURN_IF_ERROR(CheckPromptGroups(groups, capabilities_.vocab_size,
                                    /*check_labels=*/false));
  RETURN_IF_ERROR(CheckResolvedLayers(layers, capabilities_.n_layers));
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
  // Early stop: every pass runs only as deep as needed.
  int32_t depth = 0;
  for (int32_t layer : layers) depth = std::max(depth, layer);
  auto emit = [&](const std::vector<int64_t>& ids,
                  const model::ForwardResult& result) {
    // One device-to-host copy per pass: [R, L, H].
    const at::Tensor hidden = result.hidden.cpu().contiguous();
    const float* base = hidden.data_ptr<float>();
    for (size_t r = 0; r < ids.size(); ++r) {
      std::memcpy(out.values.data() + static_cast<size_t>(ids[r]) * row_values,
                  base + r * row_values, row_values * sizeof(float));
    }
  };
  const absl::Status status = state_->Run(
      groups, layers, depth == capabilities_.n_layers, depth, control, emit);
  state_->ReportPool();
  RETURN_IF_ERROR(status);
  return out;
}

std::optional<DeviceInfo> Qwen3Backend::device_info() const {
  DeviceInfo info;
  info.name = device_.name;
  info.compute_capability = device_.compute_capability;
  info.shared_memory = device_.shared_memory;
  info.driver_cuda = model::CudaVersionText(device_.driver_cuda);
  info.runtime_cuda = model::CudaVersionText(device_.runtime_cuda);
  return info;
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
