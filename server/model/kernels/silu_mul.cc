#include "server/model/kernels/silu_mul.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include "server/model/kernels/cuda_call.h"

namespace mesa_anyjev::model::kernels {
namespace {

constexpr const char* kKernel = "silu_mul kernel";

at::Tensor SiluMulAten(const at::Tensor& gate_up) {
  const auto gate_and_up = gate_up.chunk(2, -1);
  return at::silu(gate_and_up[0]).mul_(gate_and_up[1]);
}

void SiluMulCuda(const at::Tensor& gate_up, const at::Tensor& out) {
  TORCH_CHECK(gate_up.dim() == 2 && gate_up.size(1) % 2 == 0, kKernel,
              ": gate_up must be [N, 2I]");
  const int64_t inner = gate_up.size(1) / 2;
  TORCH_CHECK(
      out.dim() == 2 && out.size(0) == gate_up.size(0) && out.size(1) == inner,
      kKernel, ": out must be [", gate_up.size(0), ", ", inner, "]");
  TORCH_CHECK(inner * gate_up.element_size() % 16 == 0, kKernel,
              ": I = ", inner, " is not a whole number of 16-byte packs");
  CheckForLaunch(kKernel, gate_up.device(), gate_up.scalar_type(),
                 {&gate_up, &out});
  if (gate_up.size(0) == 0) return;
  const c10::DeviceGuard guard(gate_up.device());
  CheckLaunched(
      cuda::LaunchSiluMul(LaunchDtype(gate_up, kKernel), gate_up.data_ptr(),
                          out.data_ptr(), gate_up.size(0), inner,
                          CurrentStream(gate_up.device())),
      kKernel);
}

}  // namespace

at::Tensor SiluMul(const at::Tensor& gate_up, bool fused) {
  if (!fused) return SiluMulAten(gate_up);
  at::Tensor out =
      at::empty({gate_up.size(0), gate_up.size(-1) / 2}, gate_up.options());
  SiluMulCuda(gate_up, out);
  return out;
}

void SiluMulInto(const at::Tensor& gate_up, bool fused, const at::Tensor& out) {
  if (fused) return SiluMulCuda(gate_up, out);
  out.copy_(SiluMulAten(gate_up));
}

}  // namespace mesa_anyjev::model::kernels
