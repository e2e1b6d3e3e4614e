// ModelRunner's load: every path a pass takes is resolved here, once, into
// RunnerPaths (model_runner.h), which the start log prints and the passes
// (runner_pass.cc) read.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/util/meminfo.h"
#include "server/model/cpu_gemm.h"
#include "server/model/cpu_paths.h"
#include "server/model/cuda/cuda_calls.h"
#include "server/model/device_probe.h"
#include "server/model/host_block_cache.h"
#include "server/model/kernels/resolve.h"
#include "server/model/memory_fit.h"
#include "server/model/qwen3_loader.h"
#include "server/model/runner_state.h"

namespace mesa_anyjev::model {
namespace {

// lm_head and the log-softmax read a pass's output rows this many at a
// time: their float32 logits (0.6 MB a row at Qwen3's vocabulary) stay
// bounded however many rows a pass has, and are counted at load.
constexpr int64_t kChunkRows = 512;

int64_t Saturated(int64_t a, int64_t b) {
  return b != 0 && a > std::numeric_limits<int64_t>::max() / b
             ? std::numeric_limits<int64_t>::max()
             : a * b;
}

// What a pass allocates beyond the weights and the pool, at most: the
// activations of a layer for engine.batch_tokens tokens (the residual, the
// norms' outputs, q/k/v, attention's output, the MLP's gate/up and its
// product: the widest of them held at once), and lm_head's float32 logits
// and log-probabilities of one chunk of rows.
int64_t PassBytes(const Qwen3Config& c, int64_t element, int64_t tokens,
                  int64_t chunk_rows) {
  const int64_t qkv =
      (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
  const int64_t per_token =
      (4 * c.hidden_size + qkv + c.num_attention_heads * c.head_dim +
       3 * c.intermediate_size) *
      element;
  const int64_t logits = Saturated(2 * chunk_rows * c.vocab_size, 4);
  return Saturated(tokens, per_token) + logits;
}

// The load's memory check (memory_fit.h): what stays once loaded, and what
// a pass and the CUDA graphs' pool take, against MemAvailable where the
// device's memory is the system's, else against the device's free memory.
absl::Status CheckMemoryFits(const Qwen3Config& c, const std::string& dtype,
                             const config::EngineConfig& engine,
                             const DeviceFacts& device) {
  const int64_t element = dtype == "bfloat16" ? 2 : 4;
  MemoryPlan plan;
  plan.weights = Saturated(c.ParameterCount(), element);
  plan.kv_pool = engine.kv_pool_bytes;
  plan.host_cache = device.device == "cpu" ? engine.host_cache_bytes : 0;
  plan.reserve = engine.memory_reserve_bytes;
  plan.pass = PassBytes(c, element, engine.batch_tokens, kChunkRows);
  // One pool for every captured shape: a pass of the largest, whose rows
  // are at most its tokens (graphs replay one at a time).
  if (engine.cuda_graph_tokens > 0 && device.device != "cpu") {
    plan.graph_pool = PassBytes(c, element, engine.cuda_graph_tokens,
                                engine.cuda_graph_tokens);
  }
  int64_t available = 0;
  if (device.shared_memory) {
    ASSIGN_OR_RETURN(available, util::ReadMemAvailable());
  }
  return CheckMemoryFits(plan, device, available);
}

// A CPU model's heap: a pass's activations on the CPU (tens of MB each) are
// over glibc's mmap threshold, so each would be mapped, page-faulted in and
// unmapped again, op after op; freed memory is kept in the heap instead
// (docs/model.md has the figures). The largest (over 64 MiB) are mapped
// anew all the same when the thread's arena is not the main one: the host
// block cache keeps those. Whether the heap was kept.
bool TuneCpuHeap(int64_t host_cache_bytes) {
  const bool kept = KeepFreedHeap();
  if (host_cache_bytes > 0) InstallHostBlockCache(host_cache_bytes);
  return kept;
}

std::string GemmLine(CpuGemm asked, const Qwen3Model& m) {
  std::string line = CpuGemmName(m.gemm());
  std::string why;
  if (asked == CpuGemm::kOneDnn && m.device().is_cpu() &&
      m.dtype() == at::kFloat && !OneDnnLinearWorks(&why)) {
    line += " (" + why + ")";
  } else if (!m.gemm_note().empty()) {
    line += " (cpu_gemm auto: " + m.gemm_note() + ")";
  }
  return line;
}

// model.attention, and for sdpa on CUDA whether the variable-length kernel
// works here and, with model.cascade_attention, the cascade (both probed).
void DecideAttention(const Qwen3Model& m, Attention kind, bool want_cascade,
                     RunnerPaths& paths) {
  paths.attention = kind;
  if (kind == Attention::kSdpa && m.device().is_cuda()) {
    const Qwen3Config& c = m.config();
    paths.varlen = VarlenAttentionWorks(
        m.device(), m.dtype(), c.num_attention_heads, c.num_key_value_heads,
        c.head_dim, &paths.attention_note);
    if (paths.varlen && want_cascade) {
      paths.cascade = VarlenAttentionWorks(
          m.device(), m.dtype(), c.num_attention_heads, c.num_key_value_heads,
          c.head_dim, &paths.attention_note, /*cascade=*/true);
    }
  } else if (want_cascade) {
    paths.attention_note = "model.cascade_attention needs sdpa on CUDA";
  }
  paths.route =
      ChooseRoute(kind, m.device().is_cpu(), paths.varlen, paths.cascade);
}

// The KV pool, allocated once: every pass's keys and values and the prefix
// cache share it. With graphs, one block more that no engine block is: the
// scratch where a padded pass's pads write and read.
absl::Status AllocateKv(ModelRunner::State& s,
                        const config::EngineConfig& engine) {
  const int64_t block_tokens = engine.kv_block_tokens;
  const int64_t block_bytes = block_tokens * s.model->KvBytesPerToken();
  const int64_t num_blocks = engine.kv_pool_bytes / block_bytes;
  if (num_blocks < 1 ||
      num_blocks > std::numeric_limits<int32_t>::max() / block_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine.kv_pool_bytes: ", engine.kv_pool_bytes, " bytes hold ",
        num_blocks, " blocks of ", block_tokens, " tokens (", block_bytes,
        " bytes each for this model); give at least one block and fewer "
        "than 2^31 positions"));
  }
  s.kv = {static_cast<int32_t>(num_blocks), static_cast<int32_t>(block_tokens),
          block_bytes};
  const int64_t graph_tokens = s.paths.graph_tokens;
  s.pool = s.model->NewKvPool((num_blocks + (graph_tokens > 0 ? 1 : 0)) *
                              block_tokens);
  if (graph_tokens > 0) {
    s.graphs = std::make_unique<PassGraphs>(
        *s.model, s.pool, num_blocks * block_tokens, graph_tokens);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelRunner::State>> LoadState(
    const config::ModelConfig& config, const config::EngineConfig& engine) {
  auto s = std::make_unique<ModelRunner::State>();
  RunnerPaths& paths = s->paths;
  at::set_num_threads(
      std::max(config.threads > 0
                   ? config.threads
                   : static_cast<int>(std::thread::hardware_concurrency()),
               1));
  ASSIGN_OR_RETURN(paths.device, ProbeDevice(config.device));
  Qwen3LoadOptions options;
  options.dtype = config.dtype;
  options.device = config.device;
  ASSIGN_OR_RETURN(const Attention attention, ParseAttention(config.attention));
  ASSIGN_OR_RETURN(options.gemm, ParseCpuGemm(config.cpu_gemm));
  ASSIGN_OR_RETURN(const config::KernelSet kernels,
                   config::ParseKernelSet(config.kernels));
  options.kernels = kernels::ResolveKernels(kernels, c10::Device(config.device),
                                            &paths.kernels_note);
  // config.json first, then the memory check, then the weights: a model that
  // cannot fit is refused before a byte of it is read.
  ASSIGN_OR_RETURN(OpenedQwen3 opened, OpenQwen3(config.path, options));
  RETURN_IF_ERROR(
      CheckMemoryFits(opened.config, config.dtype, engine, paths.device));
  ASSIGN_OR_RETURN(LoadedQwen3 loaded, LoadQwen3(std::move(opened), options));
  s->model = std::move(loaded.model);
  const Qwen3Model& m = *s->model;
  paths.device_name = m.device().str();
  paths.dtype = config.dtype;
  paths.gemm = GemmLine(options.gemm, m);
  paths.kernels = m.kernels();
  paths.chunk_rows = kChunkRows;
  const bool heap_kept =
      m.device().is_cpu() && TuneCpuHeap(engine.host_cache_bytes);
  DecideAttention(m, attention, config.cascade_attention, paths);
  // engine.cuda_graph_tokens where graphs can replay: the CUDA
  // variable-length kernel works here (a graph's attention), or the CPU,
  // where the padded pass runs eagerly (the test path).
  if (engine.cuda_graph_tokens > 0 && (!m.device().is_cuda() || paths.varlen)) {
    paths.graph_tokens = engine.cuda_graph_tokens;
  }
  if (m.device().is_cpu()) {
    paths.cpu_paths = DescribeCpuPaths(ChooseCpuPaths(
        at::TensorOptions(m.dtype()).device(m.device()), attention,
        m.config().head_dim, heap_kept, engine.host_cache_bytes));
  }
  RETURN_IF_ERROR(AllocateKv(*s, engine));
  s->batch_tokens = engine.batch_tokens;
  const Qwen3Config& c = m.config();
  s->shape = {static_cast<int32_t>(c.num_hidden_layers),
              static_cast<int32_t>(c.hidden_size),
              static_cast<int32_t>(c.vocab_size), loaded.fingerprint,
              loaded.weight_bytes};
  return s;
}

}  // namespace

std::string RunnerPaths::AttentionLine() const {
  std::string line = AttentionName(attention);
  if (varlen) line += cascade ? " (varlen, cascade)" : " (varlen)";
  return line;
}

std::vector<std::string> RunnerPaths::LogLines() const {
  std::vector<std::string> lines = {
      Describe(device),
      absl::StrCat("Qwen3 on ", device_name, " in ", dtype, ", ",
                   AttentionLine(), " attention, projections by ", gemm)};
  std::string forward = absl::StrCat("forward: kernels ", kernels.ToString());
  if (!kernels_note.empty()) absl::StrAppend(&forward, " (", kernels_note, ")");
  absl::StrAppend(&forward, ", attention route ", AttentionRouteName(route));
  if (graph_tokens > 0) {
    absl::StrAppend(&forward, ", CUDA graphs for passes up to ", graph_tokens,
                    " tokens");
  }
  lines.push_back(forward);
  if (!cpu_paths.empty()) lines.push_back("CPU paths: " + cpu_paths);
  if (!attention_note.empty()) lines.push_back("attention: " + attention_note);
  return lines;
}

absl::StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Load(
    const config::ModelConfig& model, const config::EngineConfig& engine) {
  try {
    ASSIGN_OR_RETURN(std::unique_ptr<State> state, LoadState(model, engine));
    return std::unique_ptr<ModelRunner>(new ModelRunner(std::move(state)));
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loading the model on ", model.device, " in ", model.dtype,
        " failed: ", ExceptionLine(e),
        " (check model.device names a device this host has, that it has "
        "free memory for the weights and engine.kv_pool_bytes, and "
        "model.dtype)"));
  }
}

ModelRunner::ModelRunner(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

ModelRunner::~ModelRunner() = default;

const RunnerPaths& ModelRunner::paths() const { return state_->paths; }
const ModelShape& ModelRunner::shape() const { return state_->shape; }
const KvGeometry& ModelRunner::kv() const { return state_->kv; }

void ModelRunner::BindThread() {
  const at::Device device = state_->model->device();
  if (device.is_cuda()) cuda::SetCurrentDevice(device.index());
}

DeviceInfo ModelRunner::device_info() const {
  const DeviceFacts& d = state_->paths.device;
  DeviceInfo info;
  info.name = d.name;
  info.compute_capability = d.compute_capability;
  info.shared_memory = d.shared_memory;
  info.driver_cuda = CudaVersionText(d.driver_cuda);
  info.runtime_cuda = CudaVersionText(d.runtime_cuda);
  return info;
}

std::optional<DeviceMemory> ModelRunner::device_memory() const {
  const at::Device device = state_->model->device();
  if (!device.is_cuda()) return std::nullopt;
  const cuda::AllocatorStats stats = cuda::ReadAllocatorStats(device.index());
  return DeviceMemory{stats.allocated_bytes, stats.reserved_bytes};
}

}  // namespace mesa_anyjev::model
