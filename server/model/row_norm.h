// Qwen3's RMSNorm, and its per-head norm followed by the rotary embedding, as
// one pass over the rows on the CPU in float32: the ATen composition runs
// about ten passes (square, mean, rsqrt, products, the rotated copy, sums)
// over [tokens, heads, D], which costs more than the matmuls it sits between
// on a small model. Other devices and dtypes keep the composition
// (qwen3_model.cc), which the float32 CPU results are tested against through
// transformers.
#pragma once

#include <ATen/core/Tensor.h>

namespace mesa_anyjev::model {

// Whether RowNorm takes x (float32 on the CPU, unit stride on its last axis).
bool RowNormApplies(const at::Tensor& x);

// x [N, H, D] -> contiguous [N, H, D]: each row x[n, h] scaled by
// 1 / sqrt(mean(x[n, h]^2) + eps) and by `weight` [D]; then, when cos and
// sin ([N, 1, D]) are defined, rotated as transformers' apply_rotary_pos_emb
// (out = y * cos + rotate_half(y) * sin).
at::Tensor RowNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   const at::Tensor& cos, const at::Tensor& sin);

}  // namespace mesa_anyjev::model
