// Qwen3ForCausalLM's forward in libtorch, as transformers computes it, keyed
// by the same tensor names. One thread owns a model (the engine's); nothing
// here takes locks. The forward runs only as deep as the deepest block asked
// for and applies lm_head only where log-probabilities are wanted.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

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

// How attention is computed. kEager is transformers' eager path (matmul,
// float32 softmax) and the exact default; kSdpa is libtorch's fused
// scaled_dot_product_attention (flash / memory-efficient kernels on CUDA).
enum class Attention { kEager, kSdpa };
const char* AttentionName(Attention attention);

// Keys (after RoPE) and values of a prefix, per block, before the kv heads are
// repeated: what a suffix attends to instead of recomputing the prefix.
struct PrefixState {
  std::vector<at::Tensor> keys;    // per block [1, kv, P, D]
  std::vector<at::Tensor> values;  // per block [1, kv, P, D]
  int64_t length = 0;              // P
  int32_t depth = 0;               // blocks covered (keys.size())

  int64_t bytes() const;
  // The first `length` positions (a prefix of a prefix is exact: causal).
  PrefixState Truncated(int64_t length) const;
};

struct ForwardRequest {
  // [B, T] int64 on the model's device, right-padded. With a prefix, these
  // are the suffixes; positions start at prefix->length.
  at::Tensor tokens;
  std::vector<int64_t> lengths;  // real tokens of each row, 1..T
  std::vector<int32_t> layers;   // capture after these blocks (0..n), any order
  bool final_norm = false;       // also return norm(h_n) for lm_head
  // Row 0 extends the prefix (or starts one) by its lengths[0] tokens, and
  // rows 1.. follow the prefix and those tokens: a group's uncached prefix
  // part and its suffixes in one pass instead of a prefill and a forward
  // (each pass reads every weight once). The extended prefix's keys and
  // values are recorded.
  bool extends_prefix = false;
};

// Rows of the request, without an extension row.
struct ForwardResult {
  at::Tensor hidden;  // [B, layers.size(), H] float32 at each row's last token
  at::Tensor final;   // [B, H] model dtype: norm(h_n) at the last token
  int32_t blocks_run = 0;
};

class Qwen3Model {
 public:
  // The projections are packed for `gemm` (packed_linear.h); the model's
  // weights are released as they are packed.
  Qwen3Model(Qwen3Config config, Qwen3Weights weights, Attention attention,
             CpuGemm gemm = CpuGemm::kOneDnn);

  const Qwen3Config& config() const { return config_; }
  Attention attention() const { return attention_; }
  // What the block projections actually use: kOneDnn only where packing
  // applied (CPU, float32, the probe passed).
  CpuGemm gemm() const { return gemm_; }
  // Bytes held beside the checkpoint's weights: a packed copy of a tied
  // lm_head (the embedding lookup keeps the dense one).
  int64_t extra_weight_bytes() const { return extra_weight_bytes_; }
  at::ScalarType dtype() const { return weights_.embed_tokens.scalar_type(); }
  at::Device device() const { return weights_.embed_tokens.device(); }

  // Layer numbering of decision-method.md 7.1: 0 = embeddings, b = after
  // block b (no final norm), n = after the final norm.
  ForwardResult Forward(const ForwardRequest& request) const;
  // The same with every row preceded by `prefix` (which must cover at least
  // as many blocks as the request needs). With request.extends_prefix,
  // `record` (required then) gets prefix + row 0's keys and values.
  ForwardResult Forward(const ForwardRequest& request,
                        const PrefixState* prefix,
                        PrefixState* record = nullptr) const;

  // Runs `tokens` [1, T] through `depth` blocks after `past` (nullptr: from
  // position 0) and returns past + these tokens' keys and values.
  PrefixState Prefill(const at::Tensor& tokens, int32_t depth,
                      const PrefixState* past) const;

  // [B, H] -> [B, V] float32 log-softmax of lm_head over the whole vocabulary.
  at::Tensor LogSoftmax(const at::Tensor& final) const;

 private:
  // Per-block context: rotary tables for the new positions, the mask over
  // [past + extension + new] keys, the past keys/values, and where to record
  // the extended prefix.
  struct Context {
    at::Tensor cos, sin;  // [T, D]; [B, 1, T, D] with an extension
    // [T, P + T], or [B, 1, T, P + E + T] with an extension: bool, true =
    // may not attend (eager and the masked sdpa).
    at::Tensor masked;
    int64_t extension = 0;  // E: row 0's tokens that rows 1.. follow
    // sdpa: without a past the mask is exactly causal, which SDPA's own
    // causal kernels take without a mask; with one, `allowed` = !masked,
    // built once per forward rather than once per block.
    bool causal_only = false;
    // sdpa on CPU with a past: the past and the new tokens attended to
    // separately and merged (SharedPrefixAttention), no mask, no copies of
    // the past per row; CUDA keeps one masked kernel over [past + new].
    bool split_past = false;
    at::Tensor allowed;
    const PrefixState* past = nullptr;
    PrefixState* record = nullptr;
  };
  Context MakeContext(int64_t b, int64_t t, const PrefixState* past,
                      int64_t extension, PrefixState* record) const;
  // Forward through exactly `depth` blocks.
  ForwardResult Run(const ForwardRequest& request, int32_t depth,
                    const PrefixState* prefix, PrefixState* record) const;
  at::Tensor Block(int32_t index, const at::Tensor& x,
                   const Context& context) const;
  at::Tensor SelfAttention(int32_t index, const at::Tensor& x,
                           const Context& context) const;

  // A block's four GEMMs: q/k/v and gate/up concatenated at load (one GEMM
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
  // [V, H] matrix on each call (29 ms for 4 rows of a 151,936 x 512 head on
  // the build host, against 7 ms packed once).
  PackedLinear lm_head_;
  Attention attention_;
  CpuGemm gemm_ = CpuGemm::kAten;
  int64_t extra_weight_bytes_ = 0;
  at::Tensor inv_freq_;  // [D/2] float32
};

}  // namespace mesa_anyjev::model
