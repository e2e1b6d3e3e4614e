// Qwen3ForCausalLM's forward in libtorch, as transformers computes it, keyed
// by the same tensor names. One thread owns a model (the engine's); nothing
// here takes locks. The forward runs only as deep as the deepest layer asked
// for and applies lm_head only where log-probabilities are wanted.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/kernel_set.h"
#include "server/model/attention.h"
#include "server/model/kernels/qk_norm_rope.h"
#include "server/model/kv_pool.h"
#include "server/model/packed_linear.h"
#include "server/model/qwen3_config.h"

namespace mesa_anyjev::model {

struct Qwen3LayerWeights {
  at::Tensor input_layernorm;  // [H]
  // The projections are moved into the model's packed linears at
  // construction and are empty afterwards.
  at::Tensor q_proj, k_proj, v_proj;    // [heads*D, H], [kv*D, H], [kv*D, H]
  at::Tensor o_proj;                    // [H, heads*D]
  at::Tensor q_norm, k_norm;            // [D]
  at::Tensor post_attention_layernorm;  // [H]
  at::Tensor gate_proj, up_proj;        // [I, H]
  at::Tensor down_proj;                 // [H, I]
};

struct Qwen3Weights {
  at::Tensor embed_tokens;  // [V, H]
  std::vector<Qwen3LayerWeights> layers;
  at::Tensor norm;  // [H]
  // [V, H]; the embedding itself when tied. Moved into the model's packed
  // lm_head at construction (a tied one stays: the embedding needs it).
  at::Tensor lm_head;
};

// One forward pass over packed segments (server/engine/pass_planner.h): the
// tokens of every segment in one row, each at its own position.
struct PackedPass {
  at::Tensor tokens;     // [N] int64 on the model's device
  at::Tensor positions;  // [N] int64
  at::Tensor outputs;    // [R] int64: rows whose results are wanted
  KvWrites writes;       // where its keys and values go in the pool
  const AttentionPlan* attention = nullptr;
  std::vector<int32_t> layers;  // capture after these layers (0..n)
  bool final_norm = false;      // also return norm(h_n) for lm_head
};

struct ForwardResult {
  at::Tensor hidden;  // [R, layers.size(), H] float32 at the output rows
  at::Tensor final;   // [R, H] model dtype: norm(h_n) at the output rows
  int32_t layers_run = 0;
};

class Qwen3Model {
 public:
  // The projections are packed for `gemm` (packed_linear.h); the model's
  // weights are released as they are packed.
  // `kernels`: which stages run as our fused CUDA kernels (resolved for
  // the device at load: server/model/kernels/resolve.h); the rest, and all
  // of them off CUDA, run the ATen composition.
  Qwen3Model(Qwen3Config config, Qwen3Weights weights,
             CpuGemm gemm = CpuGemm::kOneDnn, config::KernelSet kernels = {});

  const Qwen3Config& config() const { return config_; }
  // What the layers' projections actually use: kOneDnn only where packing
  // applied (CPU, float32, the probe passed; with kAuto, measured faster).
  CpuGemm gemm() const { return gemm_; }
  const config::KernelSet& kernels() const { return kernels_; }
  // How kAuto chose (the two timings), or why oneDNN was not used.
  const std::string& gemm_note() const { return gemm_note_; }
  // Bytes held beside the checkpoint's weights: a packed copy of a tied
  // lm_head (the embedding lookup keeps the dense one).
  int64_t extra_weight_bytes() const { return extra_weight_bytes_; }
  at::ScalarType dtype() const { return weights_.embed_tokens.scalar_type(); }
  at::Device device() const { return weights_.embed_tokens.device(); }

  // Layer numbering of docs/decision.md (L2: heads): 0 = embeddings, l = after
  // transformer layer l (no final norm), n = after the final norm. Runs as
  // deep as the deepest layer asked for (n with final_norm) and writes the
  // pass's keys and values into `pool` for the layers it runs.
  ForwardResult Forward(const PackedPass& pass, KvPool& pool) const;
  // A pool of `slots` positions for every layer.
  KvPool NewKvPool(int64_t slots) const;
  // Bytes of keys and values one position takes over every layer.
  int64_t KvBytesPerToken() const;

  // [B, H] -> [B, V] float32 log-softmax of lm_head over the whole vocabulary.
  at::Tensor LogSoftmax(const at::Tensor& final) const;

 private:
  // Per-pass tables every layer reads.
  struct Context {
    kernels::Rotary rotary;  // positions, inv_freq, and tables if needed
    const PackedPass* pass = nullptr;
    KvPool* pool = nullptr;
  };
  at::Tensor Layer(int32_t index, const at::Tensor& x,
                   const Context& context) const;
  at::Tensor SelfAttention(int32_t index, const at::Tensor& x,
                           const Context& context) const;

  // A layer's four GEMMs: q/k/v and gate/up concatenated at load (one GEMM
  // each instead of three and two), all packed for the CPU GEMM.
  struct LayerLinears {
    PackedLinear qkv_proj;      // [(heads + 2 kv) * D, H]
    PackedLinear o_proj;        // [H, heads * D]
    PackedLinear gate_up_proj;  // [2 I, H]
    PackedLinear down_proj;     // [H, I]
  };

  Qwen3Config config_;
  Qwen3Weights weights_;
  std::vector<LayerLinears> linears_;
  // lm_head packed too: with a few rows MKL's sgemm repacks the whole
  // [V, H] matrix on each call (docs/model.md has the figures).
  PackedLinear lm_head_;
  CpuGemm gemm_ = CpuGemm::kAten;
  config::KernelSet kernels_;
  std::string gemm_note_;
  int64_t extra_weight_bytes_ = 0;
  at::Tensor inv_freq_;  // [D/2] float32
};

}  // namespace mesa_anyjev::model
