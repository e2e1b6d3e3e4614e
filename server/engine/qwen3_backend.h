// The daemon's Backend over a local Qwen3 checkpoint: the byte-level BPE
// tokenizer of the checkpoint and the libtorch model. It is also the
// ForwardModel the job queue runs merged calls on: every member's prompt
// groups run in full packed passes (pass_planner.h) over the KV pool the
// engine owns (kv_blocks.h), a group's prefix found in the prefix cache to
// the block or computed once in the pass of its suffixes, and a member whose
// caller stops is dropped alone. Runs on the engine thread only (the job
// queue's), so it holds no locks. libtorch stays out of this header.
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
#include "server/engine/engine_observer.h"
#include "server/engine/fault_plan.h"
#include "server/engine/forward_call.h"
#include "server/model/device_facts.h"

namespace mesa_anyjev::engine {

class Qwen3Backend final : public Backend, public ForwardModel {
 public:
  // Loads `model.path` (tokenizer.json + config.json + safetensors).
  // `observer` (may be null) hears about batches and the prefix cache.
  // A libtorch or CUDA error while loading (a missing cuda:N, out of device
  // memory, a failed packing) comes back as one line saying what to check,
  // never as an exception.
  static absl::StatusOr<std::unique_ptr<Qwen3Backend>> Load(
      const config::ModelConfig& model, const config::EngineConfig& engine,
      EngineObserver* observer);
  ~Qwen3Backend() override;

  const ModelIdentity& identity() const override { return identity_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  const text::Tokenizer& tokenizer() const override;
  const text::ChatTemplate& chat_template() const override;

  // One caller's call: a ForwardCall of one member.
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override;
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;
  absl::StatusOr<ForwardOutput> Run(const ForwardCall& call) override;

  // CUDA's caching-allocator statistics for the model's device.
  std::optional<DeviceMemory> device_memory() const override;
  std::optional<DeviceInfo> device_info() const override;
  // What the load read of its device (logged at start).
  const model::DeviceFacts& device_facts() const { return device_; }

  int64_t weight_bytes() const { return weight_bytes_; }
  // How the block projections multiply, for the load log: "onednn",
  // "aten", or "aten" with why oneDNN was not used where it was asked for.
  const std::string& gemm() const { return gemm_; }
  // The forward's paths, for the load log: which stages run as our fused
  // kernels (and why some asked for do not), the attention route, and the
  // CUDA graphs' reach.
  const std::string& paths() const { return paths_; }
  // Why sdpa on CUDA fell back to the masked kernel (empty otherwise).
  const std::string& attention_note() const { return attention_note_; }
  // A CPU model's other CPU-specific paths, for the load log: "norms fused
  // (row_norm), attention eager (ATen), heap kept (mallopt), host block
  // cache N bytes"; empty on CUDA.
  const std::string& cpu_paths() const { return cpu_paths_; }

  // Tests only (mesa-anyjevd --inject-faults): the passes `plan` names fail
  // as a device would (fault_plan.h).
  void InjectFaults(FaultPlan plan);

 private:
  static absl::StatusOr<std::unique_ptr<Qwen3Backend>> LoadUnguarded(
      const config::ModelConfig& model, const config::EngineConfig& engine,
      EngineObserver* observer);
  struct State;
  static std::string PathsLine(const config::KernelSet& kernels,
                               const std::string& kernels_note,
                               const State& state);
  explicit Qwen3Backend(std::unique_ptr<State> state);
  absl::StatusOr<GroupLogprobs> RunLogprobs(const ForwardCall& call,
                                            int32_t top_k);
  absl::StatusOr<HiddenStatesResult> RunHiddenStates(
      const ForwardCall& call, const std::vector<int32_t>& layers);
  // CheckPromptGroups for every member: nothing out of range may index a
  // tensor, whoever called.
  absl::Status CheckGroups(const ForwardCall& call, bool check_labels) const;

  std::unique_ptr<State> state_;
  ModelIdentity identity_;
  Capabilities capabilities_;
  int64_t weight_bytes_ = 0;
  std::string gemm_;
  std::string paths_;
  std::string attention_note_;
  std::string cpu_paths_;
  model::DeviceFacts device_;
};

}  // namespace mesa_anyjev::engine
