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
#include "common/util/meminfo.h"
#include "server/engine/cpu_paths.h"
#include "server/engine/host_block_cache.h"
#include "server/engine/kv_blocks.h"
#include "server/engine/pass_failure.h"
#include "server/engine/pass_planner.h"
#include "server/model/device_probe.h"
#include "server/model/memory_fit.h"
#include "server/model/qwen3_loader.h"
#include "server/model/stages.h"

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

at::Tensor Longs(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::kLong).to(device);
}

// Owners for the planner: the callers of a merged call (control.parts),
// each dropped alone when it stops; one owner otherwise. Outputs are
// numbered groups in order, then suffixes.
std::vector<PlanGroup> PlanGroups(const std::vector<PromptGroup>& groups,
                                  const CallControl& control) {
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
  return plan;
}

// A planned pass flattened for the forward: every segment's tokens in
// order, and the rows whose outputs are owed with the outputs' ids.
struct FlatPass {
  std::vector<int64_t> tokens, positions, slots, rows, ids;
  std::vector<model::SegmentKeys> keys;  // what attention plans from
};

FlatPass Flatten(const Pass& pass) {
  FlatPass flat;
  for (const Segment& seg : pass.segments) {
    for (int64_t t = 0; t < seg.length; ++t) {
      flat.tokens.push_back(seg.tokens[t]);
      flat.positions.push_back(seg.start + t);
      flat.slots.push_back(seg.keys[static_cast<size_t>(seg.start + t)]);
    }
    for (int64_t out : seg.outputs) {
      flat.rows.push_back(static_cast<int64_t>(flat.tokens.size()) - 1);
      flat.ids.push_back(out);
    }
    flat.keys.push_back(
        {seg.length, &seg.keys, seg.shared_id, seg.shared_length});
  }
  return flat;
}

model::PackedPass Pack(const FlatPass& flat, const Pass& pass,
                       at::Device device) {
  model::PackedPass packed;
  packed.tokens = Longs(flat.tokens, device);
  packed.positions = Longs(flat.positions, device);
  packed.outputs = Longs(flat.rows, device);
  packed.writes.slots = Longs(flat.slots, device);
  if (!pass.copy_from.empty()) {
    packed.writes.copy_from = Longs(pass.copy_from, device);
    packed.writes.copy_to = Longs(pass.copy_to, device);
  }
  return packed;
}

// A CPU model's heap: a pass's activations on the CPU (tens of MB each) are
// over glibc's mmap threshold, so each would be mapped, page-faulted in and
// unmapped again, op after op; freed memory is kept in the heap instead
// (docs/model.md has the figures). The largest (over 64 MiB) are mapped
// anew all the same when the engine thread's arena is not the main one:
// the host block cache keeps those. Whether the heap was kept.
bool TuneCpuHeap(int64_t host_cache_bytes) {
  const bool kept = KeepFreedHeap();
  if (host_cache_bytes > 0) InstallHostBlockCache(host_cache_bytes);
  return kept;
}

ModelIdentity IdentityOf(const config::ModelConfig& config,
                         const std::string& fingerprint,
                         const model::Qwen3Model& m, model::Attention attention,
                         bool varlen) {
  const std::filesystem::path dir(config.path);
  ModelIdentity identity;
  identity.name = config.name.empty() ? dir.filename().string() : config.name;
  if (identity.name.empty()) {
    identity.name = dir.parent_path().filename().string();
  }
  identity.identity = fingerprint;
  identity.dtype = config.dtype;
  identity.device = m.device().str();
  identity.attention = model::AttentionName(attention);
  if (varlen) identity.attention += " (varlen)";
  return identity;
}

Capabilities CapabilitiesOf(const model::Qwen3Config& c) {
  Capabilities capabilities;
  capabilities.hidden_states = true;
  capabilities.early_stop = true;
  capabilities.max_choice_k = kMaxChoiceOptions;
  capabilities.n_layers = static_cast<int32_t>(c.num_hidden_layers);
  capabilities.hidden_size = static_cast<int32_t>(c.hidden_size);
  capabilities.vocab_size = static_cast<int32_t>(c.vocab_size);
  return capabilities;
}

// How the layers' projections multiply, for the load log: "onednn",
// "aten", or "aten" with why oneDNN was not used where it was asked for.
std::string GemmLine(model::CpuGemm asked, const model::Qwen3Model& m) {
  std::string line = model::CpuGemmName(m.gemm());
  std::string why;
  if (asked == model::CpuGemm::kOneDnn && m.device().is_cpu() &&
      m.dtype() == at::kFloat && !model::OneDnnLinearWorks(&why)) {
    line += " (" + why + ")";
  } else if (!m.gemm_note().empty()) {
    line += " (cpu_gemm auto: " + m.gemm_note() + ")";
  }
  return line;
}

}  // namespace

struct Qwen3Backend::State {
  std::unique_ptr<text::BpeTokenizer> tokenizer;
  text::ChatTemplate chat_template = text::ChatTemplate::None();
  std::unique_ptr<model::Qwen3Model> model;
  // How attention runs, decided at load: model.attention, and for sdpa on
  // CUDA whether the variable-length kernel works here (probed).
  model::Attention attention = model::Attention::kEager;
  bool varlen = false;
  std::unique_ptr<KvBlocks> blocks;
  model::KvPool pool;
  EngineObserver* observer = nullptr;
  int64_t batch_tokens = 8192;
  int64_t block_bytes = 0;
  std::optional<FaultPlan> faults;  // tests only (InjectFaults)

  // Every prompt of `groups` through `layers_run` transformer layers, in
  // passes packed by the planner; after each pass `emit(ids, result)` gets
  // the pass's result, whose row r is output ids[r].
  template <typename Emit>
  absl::Status Run(const std::vector<PromptGroup>& groups,
                   const std::vector<int32_t>& layers, bool final_norm,
                   int32_t layers_run, const CallControl& control, Emit emit) {
    const std::vector<PlanGroup> plan = PlanGroups(groups, control);
    RETURN_IF_ERROR(PassPlanner::Check(plan, *blocks));
    PassPlanner planner(blocks.get(), plan, layers_run, batch_tokens);
    auto live = [&control](int32_t who) {
      return control.parts.empty() ||
             !control.parts[static_cast<size_t>(who)].ShouldStop(absl::Now());
    };
    const int64_t evictions = blocks->evictions();
    absl::Status status = absl::OkStatus();
    while (status.ok()) {
      if (control.ShouldStop(absl::Now())) {
        status = control.StopStatus(absl::Now(), "the forward");
        break;
      }
      model::Stages stage("mesa.plan");
      absl::StatusOr<Pass> pass = planner.Next(live);
      stage.End();
      if (!pass.ok() || pass->segments.empty()) {
        status = pass.status();
        break;
      }
      status = RunPass(*pass, planner, layers, final_norm, emit);
    }
    ReportPlanning(planner.stats(), blocks->evictions() - evictions);
    return status;
  }

  // One planned pass through the model, settled with the planner.
  template <typename Emit>
  absl::Status RunPass(const Pass& pass, PassPlanner& planner,
                       const std::vector<int32_t>& layers, bool final_norm,
                       Emit& emit) {
    const absl::Time start = absl::Now();
    model::Stages stage("mesa.pass");
    model::Stages step("mesa.plan");
    const FlatPass flat = Flatten(pass);
    absl::Status status = absl::OkStatus();
    // libtorch reports errors (a device out of memory, say) as exceptions;
    // they end the calls in this pass (pass_failure.h).
    try {
      const model::AttentionPlan plan(attention, flat.keys, model->device(),
                                      model->dtype(), varlen);
      step.Next("mesa.inputs_to_device");
      model::PackedPass packed = Pack(flat, pass, model->device());
      packed.attention = &plan;
      packed.layers = layers;
      packed.final_norm = final_norm;
      step.End();
      if (faults.has_value()) {
        if (const auto fault = faults->NextPass()) ThrowInjected(*fault);
      }
      const model::ForwardResult result = model->Forward(packed, pool);
      planner.Finish(true);
      emit(flat.ids, result);
    } catch (const std::exception& e) {
      planner.Finish(false);
      status =
          PassFailure(e,
                      {pass.tokens, static_cast<int64_t>(pass.segments.size()),
                       batch_tokens},
                      model->device().str());
    }
    if (observer != nullptr) {
      observer->OnBatch(static_cast<int64_t>(pass.segments.size()), pass.tokens,
                        absl::Now() - start);
    }
    return status;
  }

  // The checkpoint's tokenizer and chat template; a checkpoint whose chat
  // template we do not render exactly is refused.
  absl::Status LoadText(const std::filesystem::path& dir) {
    ASSIGN_OR_RETURN(chat_template, text::ChatTemplate::FromFile(dir.string()));
    ASSIGN_OR_RETURN(tokenizer, text::BpeTokenizer::FromFile(
                                    (dir / "tokenizer.json").string()));
    return absl::OkStatus();
  }

  void DecideAttention(model::Attention kind, std::string* varlen_why) {
    attention = kind;
    if (kind == model::Attention::kSdpa && model->device().is_cuda()) {
      const model::Qwen3Config& c = model->config();
      varlen = model::VarlenAttentionWorks(
          model->device(), model->dtype(), c.num_attention_heads,
          c.num_key_value_heads, c.head_dim, varlen_why);
    }
  }

  // The KV pool, allocated once: every pass's keys and values and the
  // prefix cache share it.
  absl::Status AllocateKv(const config::EngineConfig& engine) {
    const int64_t block_tokens = engine.kv_block_tokens;
    block_bytes = block_tokens * model->KvBytesPerToken();
    const int64_t num_blocks = engine.kv_pool_bytes / block_bytes;
    if (num_blocks < 1 ||
        num_blocks > std::numeric_limits<int32_t>::max() / block_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "engine.kv_pool_bytes: ", engine.kv_pool_bytes, " bytes hold ",
          num_blocks, " blocks of ", block_tokens, " tokens (", block_bytes,
          " bytes each for this model); give at least one block and fewer "
          "than 2^31 positions"));
    }
    blocks = std::make_unique<KvBlocks>(static_cast<int32_t>(num_blocks),
                                        static_cast<int32_t>(block_tokens),
                                        engine.prefix_caching);
    pool = model->NewKvPool(num_blocks * block_tokens);
    return absl::OkStatus();
  }

  void ReportPlanning(const PlanStats& stats, int64_t evictions) const {
    if (observer == nullptr) return;
    observer->OnPrefixLookups(stats.prefix_hits, stats.prefix_misses,
                              stats.reused_tokens);
    observer->OnPrefixEvictions(evictions);
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
        " failed: ", ExceptionLine(e),
        " (check model.device names a device this host has, that it has "
        "free memory for the weights and engine.kv_pool_bytes, and "
        "model.dtype)"));
  }
}

absl::StatusOr<std::unique_ptr<Qwen3Backend>> Qwen3Backend::LoadUnguarded(
    const config::ModelConfig& config, const config::EngineConfig& engine,
    EngineObserver* observer) {
  auto state = std::make_unique<State>();
  RETURN_IF_ERROR(state->LoadText(config.path));
  at::set_num_threads(
      std::max(config.threads > 0
                   ? config.threads
                   : static_cast<int>(std::thread::hardware_concurrency()),
               1));
  ASSIGN_OR_RETURN(const model::DeviceFacts device,
                   model::ProbeDevice(config.device));
  model::Qwen3LoadOptions options;
  options.dtype = config.dtype;
  options.device = config.device;
  options.before_weights = [&](const model::Qwen3Config& c) {
    return CheckMemoryFits(c, config.dtype, engine, device);
  };
  ASSIGN_OR_RETURN(const model::Attention attention,
                   model::ParseAttention(config.attention));
  ASSIGN_OR_RETURN(options.gemm, model::ParseCpuGemm(config.cpu_gemm));
  ASSIGN_OR_RETURN(model::LoadedQwen3 loaded,
                   model::LoadQwen3(config.path, options));
  state->model = std::move(loaded.model);
  const model::Qwen3Model& m = *state->model;
  const bool heap_kept =
      m.device().is_cpu() && TuneCpuHeap(engine.host_cache_bytes);
  std::string varlen_why;
  state->DecideAttention(attention, &varlen_why);
  RETURN_IF_ERROR(state->AllocateKv(engine));
  state->observer = observer;
  state->batch_tokens = engine.batch_tokens;
  state->ReportPool();

  auto backend =
      std::unique_ptr<Qwen3Backend>(new Qwen3Backend(std::move(state)));
  backend->identity_ = IdentityOf(config, loaded.fingerprint, m, attention,
                                  backend->state_->varlen);
  backend->capabilities_ = CapabilitiesOf(m.config());
  backend->weight_bytes_ = loaded.weight_bytes;
  backend->attention_note_ = varlen_why;
  backend->device_ = device;
  backend->gemm_ = GemmLine(options.gemm, m);
  if (m.device().is_cpu()) {
    backend->cpu_paths_ = DescribeCpuPaths(ChooseCpuPaths(
        at::TensorOptions(m.dtype()).device(m.device()), attention,
        m.config().head_dim, heap_kept, engine.host_cache_bytes));
  }
  return backend;
}

Qwen3Backend::Qwen3Backend(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

Qwen3Backend::~Qwen3Backend() = default;

void Qwen3Backend::InjectFaults(FaultPlan plan) {
  state_->faults = std::move(plan);
}

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
    const at::Tensor on_device = state_->model->LogSoftmax(result.final);
    model::Stages stage("mesa.outputs_to_host");
    const at::Tensor logprobs = on_device.cpu();
    stage.Next("mesa.outputs");
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
  int32_t deepest = 0;
  for (int32_t layer : layers) deepest = std::max(deepest, layer);
  auto emit = [&](const std::vector<int64_t>& ids,
                  const model::ForwardResult& result) {
    // One device-to-host copy per pass: [R, L, H].
    model::Stages stage("mesa.outputs_to_host");
    const at::Tensor hidden = result.hidden.cpu().contiguous();
    stage.Next("mesa.outputs");
    const float* base = hidden.data_ptr<float>();
    for (size_t r = 0; r < ids.size(); ++r) {
      std::memcpy(out.values.data() + static_cast<size_t>(ids[r]) * row_values,
                  base + r * row_values, row_values * sizeof(float));
    }
  };
  const absl::Status status =
      state_->Run(groups, layers, deepest == capabilities_.n_layers, deepest,
                  control, emit);
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
