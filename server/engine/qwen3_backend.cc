#include "server/engine/qwen3_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

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
#include "server/engine/pass_arrays.h"
#include "server/engine/pass_failure.h"
#include "server/engine/pass_planner.h"
#include "server/model/attention_buckets.h"
#include "server/model/cpu_gemm.h"
#include "server/model/cuda/cuda_calls.h"
#include "server/model/device_probe.h"
#include "server/model/kernels/resolve.h"
#include "server/model/memory_fit.h"
#include "server/model/pass_graphs.h"
#include "server/model/pass_upload.h"
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

// The planner's refusal of a group the KV pool cannot hold, worded with the
// setting that sizes the pool (the planner knows no configuration).
absl::Status NamePool(absl::Status status,
                      const std::optional<PoolShortfall>& shortfall) {
  if (!absl::IsResourceExhausted(status) || !shortfall.has_value()) {
    return status;
  }
  return absl::ResourceExhaustedError(
      shortfall->Describe("the pool (engine.kv_pool_bytes)"));
}

// The planner's groups: every member's, in order, each owned by its member,
// so a caller that stops is dropped alone. Outputs are numbered groups in
// order, then suffixes.
std::vector<PlanGroup> PlanGroups(const ForwardCall& call) {
  std::vector<PlanGroup> plan;
  int64_t outputs = 0;
  for (size_t m = 0; m < call.members.size(); ++m) {
    for (const PromptGroup& group : *call.members[m].groups) {
      plan.push_back({&group, static_cast<int32_t>(m), outputs});
      outputs += static_cast<int64_t>(group.suffixes.size());
    }
  }
  return plan;
}

// What the passes of a call read: logprobs (at `labels_of` and the top_k,
// after the final norm) or hidden states (at `layers`).
struct PassReading {
  std::vector<int32_t> layers;
  bool final_norm = false;
  int32_t layers_run = 0;
  const LabelsOf* labels_of = nullptr;
  int32_t top_k = 0;
};

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
                         bool varlen, bool cascade) {
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
  if (varlen)
    identity.attention += cascade ? " (varlen, cascade)" : " (varlen)";
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
  // With varlen: each shared context attended once (model.cascade_attention,
  // probed).
  bool cascade = false;
  model::AttentionRoute route = model::AttentionRoute::kEager;
  std::unique_ptr<KvBlocks> blocks;
  model::KvPool pool;
  EngineObserver* observer = nullptr;
  int64_t batch_tokens = 8192;
  int64_t block_bytes = 0;
  std::optional<FaultPlan> faults;  // tests only (InjectFaults)

  // Small logprobs passes replayed from CUDA graphs
  // (engine.cuda_graph_tokens; null when off).
  std::unique_ptr<model::PassGraphs> graphs;

  // Every prompt of `groups` through `read.layers_run` transformer layers,
  // in passes packed by the planner; after each pass `emit(ids, outputs)`
  // gets what the pass gave back, whose row r is output ids[r].
  template <typename Emit>
  absl::Status Run(const ForwardCall& call, const PassReading& read,
                   Emit emit) {
    const std::vector<PlanGroup> plan = PlanGroups(call);
    std::optional<PoolShortfall> shortfall;
    RETURN_IF_ERROR(
        NamePool(PassPlanner::Check(plan, *blocks, &shortfall), shortfall));
    PassPlanner planner(blocks.get(), plan, read.layers_run, batch_tokens);
    auto live = [&call](int32_t who) {
      return !call.members[static_cast<size_t>(who)].caller.ShouldStop(
          absl::Now());
    };
    const int64_t evictions = blocks->evictions();
    absl::Status status = absl::OkStatus();
    while (status.ok()) {
      if (call.ShouldStop(absl::Now())) {
        status = call.StopStatus(absl::Now(), "the forward");
        break;
      }
      model::Stages stage("mesa.plan");
      absl::StatusOr<Pass> pass = planner.Next(live);
      stage.End();
      if (!pass.ok() || pass->segments.empty()) {
        status = NamePool(pass.status(), planner.shortfall());
        break;
      }
      status = RunPass(*pass, planner, read, emit);
    }
    ReportPlanning(planner.stats(), blocks->evictions() - evictions);
    return status;
  }

  // One planned pass through the model, settled with the planner.
  template <typename Emit>
  absl::Status RunPass(const Pass& pass, PassPlanner& planner,
                       const PassReading& read, Emit& emit) {
    const absl::Time start = absl::Now();
    model::Stages stage("mesa.pass");
    const FlatPass flat = Flatten(pass, read.labels_of);
    absl::Status status = absl::OkStatus();
    // libtorch reports errors (a device out of memory, say) as exceptions;
    // they end the calls in this pass (pass_failure.h).
    try {
      if (faults.has_value()) {
        if (const auto fault = faults->NextPass()) ThrowInjected(*fault);
      }
      std::optional<PassOutputs> outputs = Replay(pass, flat, read);
      if (!outputs.has_value()) outputs = Eager(pass, flat, read);
      planner.Finish(true);
      emit(flat.ids, *outputs);
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

  // The pass through the forward as it comes.
  PassOutputs Eager(const Pass& pass, const FlatPass& flat,
                    const PassReading& read) {
    // The pass's plan reaches the device in one copy.
    model::Stages step("mesa.plan");
    model::PassUpload upload;
    const StagedPass staged = Stage(flat, upload);
    model::AttentionPlan plan(route, pass.keys, model->device(), model->dtype(),
                              upload);
    step.Next("mesa.inputs_to_device");
    upload.Upload(model->device());
    plan.Bind(upload);
    model::PackedPass packed = Pack(staged, upload);
    step.End();
    packed.attention = &plan;
    packed.layers = read.layers;
    packed.final_norm = read.final_norm;
    const model::ForwardResult result = model->Forward(packed, pool);
    at::Tensor labels;
    if (read.labels_of != nullptr) {
      labels =
          upload.View(staged.labels)
              .view({static_cast<int64_t>(flat.ids.size()), flat.label_width});
    }
    return ReadOutputs(*model, result, labels, read.top_k);
  }

  // A small logprobs pass from its shape's CUDA graph; nullopt when graphs
  // are off, the pass is not one, or it fits no shape.
  std::optional<PassOutputs> Replay(const Pass& pass, const FlatPass& flat,
                                    const PassReading& read) {
    if (graphs == nullptr || read.labels_of == nullptr) return std::nullopt;
    model::Stages stage("mesa.graph");
    const model::VarlenLayout sequences =
        model::PlanAttentionBuckets(model::AttentionRoute::kVarlen, pass.keys)
            .varlen;
    std::optional<model::PassGraphs::Outputs> replayed =
        graphs->Run(flat, sequences, read.top_k);
    if (!replayed.has_value()) return std::nullopt;
    PassOutputs out;
    out.labels = replayed->labels;
    out.top_values = replayed->top_values;
    out.top_ids = replayed->top_ids;
    return out;
  }

  // The checkpoint's tokenizer and chat template; a checkpoint whose chat
  // template we do not render exactly is refused.
  absl::Status LoadText(const std::filesystem::path& dir) {
    ASSIGN_OR_RETURN(chat_template, text::ChatTemplate::FromFile(dir.string()));
    ASSIGN_OR_RETURN(tokenizer, text::BpeTokenizer::FromFile(
                                    (dir / "tokenizer.json").string()));
    return absl::OkStatus();
  }

  void DecideAttention(model::Attention kind, bool want_cascade,
                       std::string* varlen_why) {
    attention = kind;
    if (kind == model::Attention::kSdpa && model->device().is_cuda()) {
      const model::Qwen3Config& c = model->config();
      varlen = model::VarlenAttentionWorks(
          model->device(), model->dtype(), c.num_attention_heads,
          c.num_key_value_heads, c.head_dim, varlen_why);
      if (varlen && want_cascade) {
        cascade = model::VarlenAttentionWorks(
            model->device(), model->dtype(), c.num_attention_heads,
            c.num_key_value_heads, c.head_dim, varlen_why, /*cascade=*/true);
      }
    } else if (want_cascade) {
      *varlen_why = "model.cascade_attention needs sdpa on CUDA";
    }
    route = model::ChooseRoute(kind, model->device().is_cpu(), varlen, cascade);
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
    // With graphs, one block more that no KvBlocks block is: the scratch
    // where a padded pass's pads write and read.
    const int64_t graph_tokens = GraphTokens(engine.cuda_graph_tokens);
    pool = model->NewKvPool((num_blocks + (graph_tokens > 0 ? 1 : 0)) *
                            block_tokens);
    if (graph_tokens > 0) {
      graphs = std::make_unique<model::PassGraphs>(
          *model, pool, num_blocks * block_tokens, graph_tokens);
    }
    return absl::OkStatus();
  }

  // engine.cuda_graph_tokens where graphs can replay: the CUDA
  // variable-length kernel works here (a graph's attention), or the CPU,
  // where the padded pass runs eagerly (the test path). 0 otherwise.
  int64_t GraphTokens(int64_t asked) const {
    if (asked <= 0) return 0;
    if (model->device().is_cuda() && !varlen) return 0;
    return asked;
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
  ASSIGN_OR_RETURN(const model::Attention attention,
                   model::ParseAttention(config.attention));
  ASSIGN_OR_RETURN(options.gemm, model::ParseCpuGemm(config.cpu_gemm));
  ASSIGN_OR_RETURN(const config::KernelSet kernels,
                   config::ParseKernelSet(config.kernels));
  std::string kernels_note;
  options.kernels = model::kernels::ResolveKernels(
      kernels, c10::Device(config.device), &kernels_note);
  // config.json first, then the memory check, then the weights: a model that
  // cannot fit is refused before a byte of it is read.
  ASSIGN_OR_RETURN(model::OpenedQwen3 opened,
                   model::OpenQwen3(config.path, options));
  RETURN_IF_ERROR(CheckMemoryFits(opened.config, config.dtype, engine, device));
  ASSIGN_OR_RETURN(model::LoadedQwen3 loaded,
                   model::LoadQwen3(std::move(opened), options));
  state->model = std::move(loaded.model);
  const model::Qwen3Model& m = *state->model;
  const bool heap_kept =
      m.device().is_cpu() && TuneCpuHeap(engine.host_cache_bytes);
  std::string varlen_why;
  state->DecideAttention(attention, config.cascade_attention, &varlen_why);
  RETURN_IF_ERROR(state->AllocateKv(engine));
  state->observer = observer;
  state->batch_tokens = engine.batch_tokens;
  state->ReportPool();

  auto backend =
      std::unique_ptr<Qwen3Backend>(new Qwen3Backend(std::move(state)));
  backend->identity_ =
      IdentityOf(config, loaded.fingerprint, m, attention,
                 backend->state_->varlen, backend->state_->cascade);
  backend->capabilities_ = CapabilitiesOf(m.config());
  backend->weight_bytes_ = loaded.weight_bytes;
  backend->attention_note_ = varlen_why;
  backend->device_ = device;
  backend->gemm_ = GemmLine(options.gemm, m);
  backend->paths_ = PathsLine(m.kernels(), kernels_note, *backend->state_);
  if (m.device().is_cpu()) {
    backend->cpu_paths_ = DescribeCpuPaths(ChooseCpuPaths(
        at::TensorOptions(m.dtype()).device(m.device()), attention,
        m.config().head_dim, heap_kept, engine.host_cache_bytes));
  }
  return backend;
}

std::string Qwen3Backend::PathsLine(const config::KernelSet& kernels,
                                    const std::string& kernels_note,
                                    const State& state) {
  std::string line = absl::StrCat("kernels ", kernels.ToString());
  if (!kernels_note.empty()) absl::StrAppend(&line, " (", kernels_note, ")");
  absl::StrAppend(&line, ", attention route ",
                  model::AttentionRouteName(state.route));
  if (state.graphs != nullptr) {
    absl::StrAppend(&line, ", CUDA graphs for passes up to ",
                    state.graphs->max_tokens(), " tokens");
  }
  return line;
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
  return OutputAs<GroupLogprobs>(
      Run({LogprobsTask{top_k}, {{&groups, control.caller()}}}));
}

absl::StatusOr<HiddenStatesResult> Qwen3Backend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  return OutputAs<HiddenStatesResult>(
      Run({HiddenStatesTask{layers}, {{&groups, control.caller()}}}));
}

absl::StatusOr<ForwardOutput> Qwen3Backend::Run(const ForwardCall& call) {
  return RunTask(
      call.task, [&](int32_t top_k) { return RunLogprobs(call, top_k); },
      [&](const std::vector<int32_t>& layers) {
        return RunHiddenStates(call, layers);
      });
}

absl::Status Qwen3Backend::CheckGroups(const ForwardCall& call,
                                       bool check_labels) const {
  for (const ForwardMember& member : call.members) {
    RETURN_IF_ERROR(CheckPromptGroups(*member.groups, capabilities_.vocab_size,
                                      check_labels));
  }
  return absl::OkStatus();
}

absl::StatusOr<GroupLogprobs> Qwen3Backend::RunLogprobs(const ForwardCall& call,
                                                        int32_t top_k) {
  RETURN_IF_ERROR(CheckGroups(call, /*check_labels=*/true));
  if (top_k < 0 || top_k > capabilities_.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top_k: ", top_k, " is outside [0, ", capabilities_.vocab_size, "]"));
  }
  c10::InferenceMode guard;
  const std::vector<const PromptGroup*> groups = call.Groups();
  GroupLogprobs out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    out[g].resize(groups[g]->suffixes.size());
  }
  // Where each output lands: outputs are numbered groups, then suffixes.
  std::vector<std::pair<size_t, size_t>> where;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g]->suffixes.size(); ++i)
      where.push_back({g, i});
  }
  LabelsOf labels_of;
  for (const auto& [g, i] : where) labels_of.push_back(&groups[g]->label_ids);
  // lm_head only at the output rows, once per pass; the log-softmax is read
  // on the device at the labels and the top_k, and only those come back.
  auto emit = [&](const std::vector<int64_t>& ids, const PassOutputs& pass) {
    const at::Tensor& top_values = pass.top_values;
    const at::Tensor& top_ids = pass.top_ids;
    const auto label_rows = pass.labels.accessor<float, 2>();
    for (size_t r = 0; r < ids.size(); ++r) {
      const auto [g, i] = where[static_cast<size_t>(ids[r])];
      PromptLogprobs& dst = out[g][i];
      for (size_t k = 0; k < groups[g]->label_ids.size(); ++k) {
        dst.label_logprobs.push_back(
            label_rows[static_cast<int64_t>(r)][static_cast<int64_t>(k)]);
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
      dst.n_tokens = static_cast<int32_t>(groups[g]->prefix.size() +
                                          groups[g]->suffixes[i].size());
    }
  };
  PassReading read;
  read.final_norm = true;
  read.layers_run = capabilities_.n_layers;
  read.labels_of = &labels_of;
  read.top_k = top_k;
  const absl::Status status = state_->Run(call, read, emit);
  state_->ReportPool();
  RETURN_IF_ERROR(status);
  return out;
}

absl::StatusOr<HiddenStatesResult> Qwen3Backend::RunHiddenStates(
    const ForwardCall& call, const std::vector<int32_t>& layers) {
  RETURN_IF_ERROR(CheckGroups(call, /*check_labels=*/false));
  RETURN_IF_ERROR(CheckResolvedLayers(layers, capabilities_.n_layers));
  c10::InferenceMode guard;
  HiddenStatesResult out;
  out.layers = layers;
  for (const PromptGroup* group : call.Groups()) {
    out.n_prompts += static_cast<int32_t>(group->suffixes.size());
  }
  out.hidden_size = capabilities_.hidden_size;
  const size_t row_values =
      layers.size() * static_cast<size_t>(out.hidden_size);
  out.values.resize(static_cast<size_t>(out.n_prompts) * row_values);
  // Early stop: every pass runs only as deep as needed.
  int32_t deepest = 0;
  for (int32_t layer : layers) deepest = std::max(deepest, layer);
  auto emit = [&](const std::vector<int64_t>& ids, const PassOutputs& pass) {
    const float* base = pass.hidden.data_ptr<float>();  // [R, L, H]
    for (size_t r = 0; r < ids.size(); ++r) {
      std::memcpy(out.values.data() + static_cast<size_t>(ids[r]) * row_values,
                  base + r * row_values, row_values * sizeof(float));
    }
  };
  PassReading read;
  read.layers = layers;
  read.final_norm = deepest == capabilities_.n_layers;
  read.layers_run = deepest;
  const absl::Status status = state_->Run(call, read, emit);
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
  const model::cuda::AllocatorStats stats =
      model::cuda::ReadAllocatorStats(device.index());
  return DeviceMemory{stats.allocated_bytes, stats.reserved_bytes};
}

}  // namespace mesa_anyjev::engine
