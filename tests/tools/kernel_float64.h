// The fused kernels' stages in float64 (server/model/kernels/), written
// from their definitions and not from the ATen paths, and the bounds both
// paths are held to (docs/model.md, "Fused kernels"). Shared by the unit
// tests of the ATen references (tests/server/kernel_reference_test.cc) and
// the GPU check's tool (kernel_check.cc).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace mesa_anyjev::kernel_float64 {

// Relative error of one rounding to `dtype`: 2^-8 for bfloat16 (8
// significant bits), 2^-11 for float16. For float32 the statistics' own
// float32 error (summation order, rsqrtf, expf: about 2^-20) outweighs
// the rounding, so 2^-20 there.
inline double UnitRoundoff(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return 1.0 / 256;
    case at::kHalf:
      return 1.0 / 2048;
    default:
      return 1.0 / (1 << 20);
  }
}

// The bounds in units of UnitRoundoff, per element, against a scale that
// is the magnitude of the terms each output is made of (twice what the
// error analysis in docs/model.md gives: 4u for a norm's output, 4u for
// silu_mul's, 10u for a rotated element).
constexpr double kNormUnits = 8;
constexpr double kRopeUnits = 16;
constexpr double kSiluUnits = 8;

// On the tensor's own device (the GPU check compares there).
inline at::Tensor F64(const at::Tensor& t) { return t.to(at::kDouble); }

// RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * w.
inline at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w,
                          double eps) {
  const at::Tensor x64 = F64(x);
  return x64 * at::rsqrt(x64.pow(2).mean(-1, true) + eps) * F64(w);
}

// The angles as the model makes them (float32 positions times float32
// inverse frequencies, a float32 product), then in float64: [N, 1, D].
inline at::Tensor Angles(const at::Tensor& positions,
                         const at::Tensor& inv_freq) {
  const at::Tensor half =
      F64(positions.to(at::kFloat).unsqueeze(-1) * inv_freq.to(at::kFloat));
  return at::cat({half, half}, -1).unsqueeze(1);
}

// [..., D] -> [..., D] with the halves swapped; `negate`: the first
// negated (rotate_half).
inline at::Tensor Swap(const at::Tensor& x, bool negate) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor second = x.slice(-1, half);
  return at::cat({negate ? -second : second, x.slice(-1, 0, half)}, -1);
}

// heads [N, H, D]: per-head RMSNorm, then y * cos + rotate_half(y) * sin.
inline at::Tensor NormRope(const at::Tensor& heads, const at::Tensor& w,
                           double eps, const at::Tensor& positions,
                           const at::Tensor& inv_freq) {
  const at::Tensor y = RmsNorm(heads, w, eps);
  const at::Tensor angles = Angles(positions, inv_freq);
  return y * angles.cos() + Swap(y, true) * angles.sin();
}

// The magnitude each rotated element is made of: |y_j cos| + |y_j' sin|.
inline at::Tensor NormRopeScale(const at::Tensor& heads, const at::Tensor& w,
                                double eps, const at::Tensor& positions,
                                const at::Tensor& inv_freq) {
  const at::Tensor y = RmsNorm(heads, w, eps).abs();
  const at::Tensor angles = Angles(positions, inv_freq);
  return y * angles.cos().abs() + Swap(y, false) * angles.sin().abs();
}

// gate_up [N, 2I] -> silu(gate) * up [N, I].
inline at::Tensor SiluMul(const at::Tensor& gate_up) {
  const at::Tensor g = F64(gate_up);
  const int64_t inner = g.size(-1) / 2;
  const at::Tensor gate = g.slice(-1, 0, inner);
  return gate / (1 + at::exp(-gate)) * g.slice(-1, inner);
}

}  // namespace mesa_anyjev::kernel_float64
