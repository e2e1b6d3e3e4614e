// The model runner: the one owner of the device. Loading resolves every
// path the forward takes once (the device's facts, the kernels, the
// attention route, the CPU norms and flash kernel, CUDA graphs, the memory
// check) into one value, RunnerPaths, that the start log prints and every
// pass reads; RunPass runs one pass as the engine's planner made it
// (pass_plan.h) and gives its outputs back on the host: the upload of its
// arrays, the attention plan, graph capture and replay, and what a failure
// of libtorch's means for the calls in it (pass_failure.h) are all here.
// Its stages are the pass anatomy's (stages.h): each named stage of a pass
// is one function of runner_pass.cc (docs/model.md, "Pass anatomy").
// libtorch stays out of this header: the engine that drives it has none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/config/kernel_set.h"
#include "server/model/attention_buckets.h"
#include "server/model/device_facts.h"
#include "server/model/pass_failure.h"
#include "server/model/pass_plan.h"

namespace mesa_anyjev::model {

// What the load chose, once.
struct RunnerPaths {
  DeviceFacts device;
  std::string device_name;  // "cpu", "cuda:0"
  std::string dtype;        // "float32", "bfloat16"
  Attention attention = Attention::kEager;
  AttentionRoute route = AttentionRoute::kEager;
  bool varlen = false;         // sdpa on CUDA: the variable-length kernel works
  bool cascade = false;        // and attends each shared context once
  std::string attention_note;  // why sdpa on CUDA fell back, if it did
  // How the projections multiply: "onednn", "aten", or "aten" with why
  // oneDNN was not used where it was asked for.
  std::string gemm;
  config::KernelSet kernels;  // the fused kernels that run
  std::string kernels_note;   // why some asked for do not
  int64_t graph_tokens = 0;   // CUDA graphs for passes up to this; 0 = off
  // A CPU model's other paths: "norms fused (row_norm), attention eager
  // (ATen), heap kept (mallopt), host block cache N bytes"; empty on CUDA.
  std::string cpu_paths;
  int64_t chunk_rows = 0;  // lm_head and the log-softmax, rows at a time

  // The attention as GetModelInfo names it: "sdpa (varlen, cascade)".
  std::string AttentionLine() const;
  // The start log's lines: the device, the model and its projections, the
  // forward's paths, the CPU paths, the attention note.
  std::vector<std::string> LogLines() const;
};

// The model's shape, as the engine and the services need it.
struct ModelShape {
  int32_t n_layers = 0;
  int32_t hidden_size = 0;
  int32_t vocab_size = 0;
  std::string fingerprint;  // sha256 of the checkpoint's weights
  int64_t weight_bytes = 0;
};

// The KV pool's geometry, for the engine's blocks (kv_blocks.h): the pool
// tensors live in the runner, their bookkeeping in the engine.
struct KvGeometry {
  int32_t num_blocks = 0;
  int32_t block_tokens = 0;
  int64_t block_bytes = 0;
};

// What the engine runs passes on: the runner, or a test's stand-in.
class PassRunner {
 public:
  virtual ~PassRunner() = default;
  // On the thread that runs passes, once, before the first.
  virtual void BindThread() {}
  // A named stage of the pass anatomy (stages.h), open until the value
  // goes: the engine's planning of a pass is "mesa.schedule". Null where
  // nothing profiles (a test's runner).
  virtual std::shared_ptr<void> OpenStage(const char* /*name*/) {
    return nullptr;
  }
  // Runs `plan`; a failure of the pass comes back classified
  // (pass_failure.h): RESOURCE_EXHAUSTED when out of memory, the
  // device-lost mark (device_fault.h), or INTERNAL. `fault` (tests only)
  // makes the pass fail as a device would.
  virtual absl::StatusOr<PassOutput> RunPass(
      const PassPlan& plan, std::optional<InjectedFault> fault) = 0;
};

class ModelRunner final : public PassRunner {
 public:
  // Loads the checkpoint at model.path onto model.device; every failure
  // (a missing cuda:N, a model that does not fit, out of device memory, a
  // failed packing) comes back as one line saying what to check, never as
  // an exception.
  static absl::StatusOr<std::unique_ptr<ModelRunner>> Load(
      const config::ModelConfig& model, const config::EngineConfig& engine);
  ~ModelRunner() override;

  const RunnerPaths& paths() const;
  const ModelShape& shape() const;
  const KvGeometry& kv() const;

  // Sets the model's device as the calling thread's current one: the thread
  // that runs passes calls it once, so graph capture, its streams and the
  // synchronise that classifies a failure act on the model's device.
  void BindThread() override;
  std::shared_ptr<void> OpenStage(const char* name) override;

  absl::StatusOr<PassOutput> RunPass(
      const PassPlan& plan, std::optional<InjectedFault> fault) override;

  // CUDA's caching-allocator statistics for the model's device; nullopt on
  // the CPU. Safe from any thread.
  std::optional<DeviceMemory> device_memory() const;
  DeviceInfo device_info() const;

  // What a loaded runner holds (runner_state.h): its load's and its pass's
  // business alone.
  struct State;

 private:
  explicit ModelRunner(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace mesa_anyjev::model
