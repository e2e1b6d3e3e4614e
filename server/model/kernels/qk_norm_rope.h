// Attention's input stage: the qkv projection's output split into heads,
// q and k each normalised per head (transformers' Qwen3RMSNorm with the
// q_norm / k_norm weights), then rotated at each token's position
// (rotate-half layout: q * cos + rotate_half(q) * sin), and, when a KV
// target is given, k and v written into the layer's pool at the tokens'
// slots.
//
// Two paths, one result up to bf16 rounding (docs/model.md, "Fused
// kernels"):
// - ATen (the reference, and the path everywhere but CUDA): the model's
//   composition (row_norm.h's one-pass loop for float32 on the CPU; ten
//   kernels or so on a GPU, over cos/sin tables made once a pass), then
//   index_copy_ into the pool as KvPool::Update does.
// - fused (CUDA): our kernel (qk_norm_rope.cu), in place in qkv, reading
//   positions and inv_freq instead of tables, one read and one write of q
//   and k and the pool's rows written from the same kernel. libtorch (2.11,
//   2.15) ships no rotary or per-head norm entry point to use instead.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mesa_anyjev::model::kernels {

// A pass's rotary inputs, made once a pass and read by every layer.
struct Rotary {
  at::Tensor positions;  // [N] int64
  at::Tensor inv_freq;   // [D/2] float32
  at::Tensor cos, sin;   // [N, 1, D] in the model's dtype (the ATen path's)
};

// positions [N] int64 and inv_freq [D/2] float32 on the model's device;
// the cos/sin tables as the model computes them (float32 angles, then the
// dtype) only when `tables` (some layer runs the ATen path).
Rotary MakeRotary(const at::Tensor& positions, const at::Tensor& inv_freq,
                  at::ScalarType dtype, bool tables);

struct QkvHeads {
  at::Tensor q;  // [N, heads, D], rotated
  at::Tensor k;  // [N, kv, D], rotated
  at::Tensor v;  // [N, kv, D]
};

// Where the pass's keys and values go (KvPool's pool of one layer): token
// t's k and v at slot slots[t] of keys/values, each laid out so that slot s
// is the [kv, D] block at s * kv * D (the [slots, kv, D] pool, or a block
// pool [blocks, block_tokens, kv, D] with slot = block * block_tokens +
// offset).
struct KvTarget {
  at::Tensor slots;  // [N] int64
  at::Tensor keys, values;
};

// qkv [N, (heads + 2 kv) * D] (unit stride on its last axis). fused: in
// place in qkv, whose views q, k and v are returned; ATen: q and k new
// tensors, v a view. `kv_target` null: no pool write.
QkvHeads QkNormRope(const at::Tensor& qkv, int64_t heads, int64_t kv_heads,
                    const at::Tensor& q_norm, const at::Tensor& k_norm,
                    double eps, const Rotary& rotary, const KvTarget* kv_target,
                    bool fused);

}  // namespace mesa_anyjev::model::kernels
