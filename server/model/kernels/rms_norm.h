// RMSNorm as transformers' Qwen3RMSNorm computes it (float32 statistics,
// the normalised value cast to the input's dtype, then times the weight in
// that dtype), alone or after the residual add that precedes it in a layer.
//
// Two paths, one result up to bf16 rounding (docs/model.md, "Fused
// kernels"):
// - ATen (the reference, and the path everywhere but CUDA): the
//   composition the model has always run, with row_norm.h's one-pass loop
//   for float32 on the CPU; the add is residual.add_(x).
// - fused (CUDA): our kernel (rms_norm.cu), reading x and the residual once
//   and writing the residual and the output once, where the ATen path moves
//   about five times those bytes through ten kernels. Not
//   at::_fused_rms_norm / at::rms_norm (torch 2.11 and 2.15 both ship them,
//   same schema): they apply the weight in float32 before the one cast, not
//   after it as transformers does, and they have no residual add.
#pragma once

#include <ATen/core/Tensor.h>

namespace mesa_anyjev::model::kernels {

// x [..., H] -> RMSNorm(x) * weight, same shape and dtype.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   bool fused);

// residual += x in place (x, residual [N, H]); returns RmsNorm(residual).
at::Tensor AddRmsNorm(const at::Tensor& x, const at::Tensor& residual,
                      const at::Tensor& weight, double eps, bool fused);

// AddRmsNorm into `out` ([N, H], residual's dtype and device); x undefined:
// no add (RmsNorm of the residual, which is then only read).
void AddRmsNormInto(const at::Tensor& x, const at::Tensor& residual,
                    const at::Tensor& weight, double eps, bool fused,
                    const at::Tensor& out);

}  // namespace mesa_anyjev::model::kernels
