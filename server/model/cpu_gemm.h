// How a CPU float32 linear layer multiplies (PackedLinear, packed_linear.h),
// and its names for model.cpu_gemm. Tensor-free, so the unit tests reach it.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace mesa_anyjev::model {

// kOneDnn packs weights for oneDNN's matmul (when the probe of
// packed_linear.h passes); kAten is at::linear, as transformers computes it;
// kAuto is whichever of the two ChooseCpuGemm measures faster on the model's
// own weights.
enum class CpuGemm { kOneDnn, kAten, kAuto };
// "onednn", "aten", "auto".
const char* CpuGemmName(CpuGemm gemm);
// The names above -> CpuGemm; anything else is INVALID_ARGUMENT.
absl::StatusOr<CpuGemm> ParseCpuGemm(const std::string& name);

}  // namespace mesa_anyjev::model
