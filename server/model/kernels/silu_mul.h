// The MLP's activation: SiLU(gate) * up over the gate_up projection's
// output [N, 2I] (gate then up) -> [N, I].
//
// Two paths, one result up to bf16 rounding (docs/model.md, "Fused
// kernels"):
// - ATen (the reference, and the path everywhere but CUDA):
//   at::silu(gate).mul_(up), two kernels that write and read back an
//   [N, I] intermediate.
// - fused (CUDA): our kernel (silu_mul.cu), one read of gate_up and one
//   write of the output. libtorch (2.11, 2.15) has no fused SiLU-and-multiply
//   (at::glu gates with a sigmoid, not SiLU).
#pragma once

#include <ATen/core/Tensor.h>

namespace mesa_anyjev::model::kernels {

at::Tensor SiluMul(const at::Tensor& gate_up, bool fused);

// The same into `out` ([N, I], gate_up's dtype and device).
void SiluMulInto(const at::Tensor& gate_up, bool fused, const at::Tensor& out);

}  // namespace mesa_anyjev::model::kernels
