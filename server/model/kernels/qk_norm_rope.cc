#include "server/model/kernels/qk_norm_rope.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include "server/model/kernels/cuda_call.h"
#include "server/model/kernels/rms_norm.h"
#include "server/model/row_norm.h"

namespace mesa_anyjev::model::kernels {
namespace {

constexpr const char* kKernel = "qk_norm_rope kernel";

// [..., D] -> [..., D] with halves swapped and the first negated.
at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

QkvHeads Split(const at::Tensor& qkv, int64_t heads, int64_t kv, int64_t d) {
  const int64_t n = qkv.size(0);
  const auto parts = qkv.split({heads * d, kv * d, kv * d}, -1);
  return {parts[0].reshape({n, heads, d}), parts[1].reshape({n, kv, d}),
          parts[2].reshape({n, kv, d})};
}

// The model's composition, then KvPool::Update's index_copy_.
QkvHeads QkNormRopeAten(const at::Tensor& qkv, int64_t heads, int64_t kv,
                        const at::Tensor& q_norm, const at::Tensor& k_norm,
                        double eps, const Rotary& rotary,
                        const KvTarget* target) {
  QkvHeads out = Split(qkv, heads, kv, q_norm.numel());
  if (RowNormApplies(out.q) && RowNormApplies(out.k)) {
    out.q = RowNorm(out.q, q_norm, eps, rotary.cos, rotary.sin);
    out.k = RowNorm(out.k, k_norm, eps, rotary.cos, rotary.sin);
  } else {
    const at::Tensor q = RmsNorm(out.q, q_norm, eps, /*fused=*/false);
    const at::Tensor k = RmsNorm(out.k, k_norm, eps, /*fused=*/false);
    out.q = q * rotary.cos + RotateHalf(q) * rotary.sin;
    out.k = k * rotary.cos + RotateHalf(k) * rotary.sin;
  }
  if (target != nullptr) {
    const int64_t d = q_norm.numel();
    target->keys.view({-1, kv, d}).index_copy_(0, target->slots, out.k);
    target->values.view({-1, kv, d}).index_copy_(0, target->slots, out.v);
  }
  return out;
}

void QkNormRopeCuda(const at::Tensor& qkv, int64_t heads, int64_t kv,
                    const at::Tensor& q_norm, const at::Tensor& k_norm,
                    double eps, const Rotary& rotary, const KvTarget* target) {
  const int64_t d = q_norm.numel();
  TORCH_CHECK(d % 2 == 0 && d <= 256 && k_norm.numel() == d, kKernel,
              ": head_dim ", d, " must be even and at most 256");
  TORCH_CHECK(qkv.dim() == 2 && qkv.size(1) == (heads + 2 * kv) * d &&
                  qkv.stride(1) == 1,
              kKernel, ": qkv must be [N, ", (heads + 2 * kv) * d,
              "] with unit stride on its last axis");
  const int64_t n = qkv.size(0);
  const at::Device device = qkv.device();
  // Read element by element: no alignment beyond the element's.
  CheckForLaunch(kKernel, device, qkv.scalar_type(), {&q_norm, &k_norm},
                 /*packed=*/false);
  CheckForLaunch(kKernel, device, at::kLong, {&rotary.positions}, false);
  CheckForLaunch(kKernel, device, at::kFloat, {&rotary.inv_freq}, false);
  TORCH_CHECK(rotary.positions.numel() == n && rotary.inv_freq.numel() == d / 2,
              kKernel, ": positions must be [", n, "], inv_freq [", d / 2, "]");
  cuda::QkNormRopeArgs args;
  args.qkv = qkv.data_ptr();
  args.tokens = n;
  args.row_stride = qkv.stride(0);
  args.heads = heads;
  args.kv_heads = kv;
  args.head_dim = d;
  args.q_weight = q_norm.data_ptr();
  args.k_weight = k_norm.data_ptr();
  args.eps = static_cast<float>(eps);
  args.positions = rotary.positions.data_ptr<int64_t>();
  args.inv_freq = rotary.inv_freq.data_ptr<float>();
  if (target != nullptr) {
    CheckForLaunch(kKernel, device, at::kLong, {&target->slots}, false);
    CheckForLaunch(kKernel, device, qkv.scalar_type(),
                   {&target->keys, &target->values}, false);
    TORCH_CHECK(target->slots.numel() == n &&
                    target->keys.numel() == target->values.numel() &&
                    target->keys.numel() % (kv * d) == 0,
                kKernel, ": slots must be [", n,
                "], keys and values alike, of [slots, ", kv, ", ", d, "]");
    args.slots = target->slots.data_ptr<int64_t>();
    args.keys = target->keys.data_ptr();
    args.values = target->values.data_ptr();
    args.pool_slots = target->keys.numel() / (kv * d);
  }
  if (n == 0) return;
  const c10::DeviceGuard guard(device);
  CheckLaunched(cuda::LaunchQkNormRope(LaunchDtype(qkv, kKernel), args,
                                       CurrentStream(device)),
                kKernel);
}

}  // namespace

Rotary MakeRotary(const at::Tensor& positions, const at::Tensor& inv_freq,
                  at::ScalarType dtype, bool tables) {
  Rotary rotary{positions, inv_freq, {}, {}};
  if (tables) {
    // As transformers: float32 angles, cos and sin, then the model's dtype.
    const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
    const at::Tensor emb = at::cat({freqs, freqs}, -1).unsqueeze(1);
    rotary.cos = emb.cos().to(dtype);
    rotary.sin = emb.sin().to(dtype);
  }
  return rotary;
}

QkvHeads QkNormRope(const at::Tensor& qkv, int64_t heads, int64_t kv_heads,
                    const at::Tensor& q_norm, const at::Tensor& k_norm,
                    double eps, const Rotary& rotary, const KvTarget* kv_target,
                    bool fused) {
  if (!fused) {
    return QkNormRopeAten(qkv, heads, kv_heads, q_norm, k_norm, eps, rotary,
                          kv_target);
  }
  QkNormRopeCuda(qkv, heads, kv_heads, q_norm, k_norm, eps, rotary, kv_target);
  return Split(qkv, heads, kv_heads, q_norm.numel());
}

}  // namespace mesa_anyjev::model::kernels
