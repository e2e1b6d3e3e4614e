// A linear layer's weight in the layout of the fastest libtorch kernel for
// it. On CPU in float32 that is oneDNN's blocked layout, packed once at load:
// libtorch's at::linear goes to MKL's sgemm, which on AMD CPUs takes a generic
// code path, slower than oneDNN with packed weights (docs/benchmarks.md has
// the figures), and repacks the weight on every call. Elsewhere (CUDA,
// bfloat16, a libtorch without oneDNN) it is the dense weight and at::linear.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "server/model/cpu_gemm.h"

namespace mesa_anyjev::model {

class PackedLinear {
 public:
  PackedLinear() = default;
  // weight: [out, in]. Packs it when `gemm` is kOneDnn, the weight is a CPU
  // float32 tensor and OneDnnLinearWorks(); otherwise keeps it dense.
  PackedLinear(const at::Tensor& weight, CpuGemm gemm);

  // x: [..., in] -> [..., out] in x's dtype.
  at::Tensor operator()(const at::Tensor& x) const;

  bool packed() const { return packed_; }

 private:
  at::Tensor weight_;  // dense [out, in], or oneDNN's opaque packed tensor
  bool packed_ = false;
};

// Whether this libtorch has oneDNN's packed linear and it agrees with
// at::linear on a random probe (checked once per process). `why` gets the
// reason when it does not.
bool OneDnnLinearWorks(std::string* why = nullptr);

// kOneDnn or kAten, whichever multiplies `weight` (a CPU float32 [out, in]
// block projection of the model being loaded) faster, over a prefill-sized
// and a decode-sized batch of rows, best of a few rounds each; kAten when
// oneDNN does not work here. `why` gets the two timings.
CpuGemm ChooseCpuGemm(const at::Tensor& weight, std::string* why);

}  // namespace mesa_anyjev::model
