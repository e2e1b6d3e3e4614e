#include "server/model/attention.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "server/model/stages.h"

namespace mesa_anyjev::model {
namespace {

// [B, kv, T, D] -> [B, kv * rep, T, D], each kv head repeated rep times.
at::Tensor RepeatKv(const at::Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const auto b = x.size(0), kv = x.size(1), t = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, kv, rep, t, d}).reshape({b, kv * rep, t, d});
}

at::Tensor Longs(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::kLong).to(device);
}

}  // namespace

AttentionPlan::AttentionPlan(Attention kind,
                             const std::vector<SegmentKeys>& segments,
                             at::Device device, at::ScalarType dtype,
                             bool varlen)
    : AttentionPlan(PlanAttentionBuckets(
                        ChooseRoute(kind, device.is_cpu(), varlen), segments),
                    device, dtype) {}

AttentionPlan::AttentionPlan(const AttentionBuckets& plan, at::Device device,
                             at::ScalarType dtype)
    : route_(plan.route), in_order_(plan.in_order) {
  if (route_ == AttentionRoute::kVarlen) {
    cu_q_ = Longs(plan.varlen.cu_q, device).to(at::kInt);
    cu_k_ = Longs(plan.varlen.cu_k, device).to(at::kInt);
    all_keys_ = Longs(plan.varlen.keys, device);
    max_q_ = plan.varlen.max_q;
    max_k_ = plan.varlen.max_k;
    return;
  }
  for (const PlannedBucket& planned : plan.buckets) {
    buckets_.push_back(OnDevice(planned, device, dtype));
  }
}

AttentionPlan::Bucket AttentionPlan::OnDevice(const PlannedBucket& planned,
                                              at::Device device,
                                              at::ScalarType dtype) const {
  const BucketIndices indices = GatherIndices(planned);
  Bucket bucket;
  bucket.b = planned.b();
  bucket.tq = planned.tq;
  bucket.tk = planned.tk;
  bucket.causal = planned.causal;
  bucket.first_row = planned.first_row;
  bucket.q_index = Longs(indices.q_index, device);
  bucket.key_slots = Longs(indices.key_slots, device);
  bucket.keep = Longs(indices.keep, device);
  bucket.out_rows = Longs(indices.out_rows, device);
  if (!planned.causal) bucket.mask = Mask(planned, device, dtype);
  return bucket;
}

at::Tensor AttentionPlan::Mask(const PlannedBucket& planned, at::Device device,
                               at::ScalarType dtype) const {
  const at::Tensor allowed =
      at::zeros({planned.b(), 1, planned.tq, planned.tk}, at::kBool);
  FillAllowed(planned, allowed.data_ptr<bool>());
  if (route_ == AttentionRoute::kEager) {
    return allowed.logical_not().to(device);  // true = may not attend
  }
  if (route_ == AttentionRoute::kCpuFlash) {
    // The CPU flash kernel adds a mask of the queries' dtype.
    return at::zeros(allowed.sizes(), at::TensorOptions(dtype))
        .masked_fill_(allowed.logical_not(),
                      -std::numeric_limits<float>::infinity())
        .to(device);
  }
  return allowed.to(device);  // true = may attend
}

at::Tensor AttentionPlan::Padded(const Bucket& bucket, const at::Tensor& q,
                                 const at::Tensor& k_pool,
                                 const at::Tensor& v_pool,
                                 double scaling) const {
  const int64_t heads = q.size(1), d = q.size(2), kv = k_pool.size(1);
  const int64_t b = bucket.b, tq = bucket.tq, tk = bucket.tk;
  // [B, heads, Tq, D] queries (one item's: a view of its rows), [B, kv, Tk,
  // D] keys and values.
  Stages stage("mesa.attention_gather");
  const at::Tensor qb =
      (bucket.first_row >= 0 ? q.narrow(0, bucket.first_row, tq)
                             : q.index_select(0, bucket.q_index))
          .reshape({b, tq, heads, d})
          .transpose(1, 2);
  const at::Tensor kb = k_pool.index_select(0, bucket.key_slots)
                            .view({b, tk, kv, d})
                            .transpose(1, 2);
  const at::Tensor vb = v_pool.index_select(0, bucket.key_slots)
                            .view({b, tk, kv, d})
                            .transpose(1, 2);
  // [B, heads, Tq, D] -> [B * Tq, heads, D] -> the real rows.
  stage.Next("mesa.attention");
  const at::Tensor out = Kernel(bucket, qb, kb, vb, scaling)
                             .transpose(1, 2)
                             .reshape({b * tq, heads, d});
  stage.Next("mesa.attention_gather");
  return bucket.first_row >= 0 ? out : out.index_select(0, bucket.keep);
}

at::Tensor AttentionPlan::Kernel(const Bucket& bucket, const at::Tensor& qb,
                                 const at::Tensor& kb, const at::Tensor& vb,
                                 double scaling) const {
  const int64_t rep = qb.size(1) / kb.size(1);
  const std::optional<at::Tensor> mask =
      bucket.causal ? std::nullopt : std::optional<at::Tensor>(bucket.mask);
  if (route_ == AttentionRoute::kCpuFlash) {
    // The CPU flash kernel reads each kv head for its query heads.
    return std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(
        qb, kb, vb, /*dropout_p=*/0.0, bucket.causal, mask, scaling));
  }
  if (route_ == AttentionRoute::kSdpa) {
    return at::scaled_dot_product_attention(
        qb, RepeatKv(kb, rep), RepeatKv(vb, rep), mask,
        /*dropout_p=*/0.0, bucket.causal, scaling);
  }
  at::Tensor scores =
      at::matmul(qb, RepeatKv(kb, rep).transpose(2, 3)) * scaling;
  scores =
      scores.masked_fill(bucket.mask, -std::numeric_limits<float>::infinity());
  const at::Tensor probs =
      at::softmax(scores, -1, at::kFloat).to(qb.scalar_type());
  return at::matmul(probs, RepeatKv(vb, rep));
}

at::Tensor AttentionPlan::Varlen(const at::Tensor& q, const at::Tensor& k_pool,
                                 const at::Tensor& v_pool,
                                 double scaling) const {
  Stages stage("mesa.attention_gather");
  const at::Tensor k = k_pool.index_select(0, all_keys_);
  const at::Tensor v = v_pool.index_select(0, all_keys_);
  stage.Next("mesa.attention");
  // Causal with more keys than queries aligns the mask to the end.
  return std::get<0>(at::_flash_attention_forward(
      q.contiguous(), k, v, cu_q_, cu_k_, max_q_, max_k_,
      /*dropout_p=*/0.0, /*is_causal=*/true, /*return_debug_mask=*/false,
      scaling));
}

at::Tensor AttentionPlan::operator()(const at::Tensor& q,
                                     const at::Tensor& k_pool,
                                     const at::Tensor& v_pool,
                                     double scaling) const {
  if (route_ == AttentionRoute::kVarlen) {
    return Varlen(q, k_pool, v_pool, scaling);
  }
  if (in_order_) return Padded(buckets_[0], q, k_pool, v_pool, scaling);
  Stages stage("mesa.attention_scatter");
  at::Tensor out = at::empty_like(q);
  for (const Bucket& bucket : buckets_) {
    out.index_copy_(0, bucket.out_rows,
                    Padded(bucket, q, k_pool, v_pool, scaling));
  }
  return out;
}
bool VarlenAttentionWorks(at::Device device, at::ScalarType dtype,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          std::string* why) {
  if (!device.is_cuda()) {
    *why = "the variable-length kernel is CUDA only";
    return false;
  }
  try {
    c10::InferenceMode guard;
    // Two segments: 5 queries over 12 keys, 3 queries over their own 3.
    const std::vector<int64_t> a{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const std::vector<int64_t> b{12, 13, 14};
    const std::vector<SegmentKeys> segments{{5, &a, -1, 0}, {3, &b, -1, 0}};
    const auto options = at::TensorOptions().dtype(dtype).device(device);
    at::manual_seed(0);
    const at::Tensor q = at::randn({8, heads, head_dim}, options);
    const at::Tensor k = at::randn({15, kv_heads, head_dim}, options);
    const at::Tensor v = at::randn({15, kv_heads, head_dim}, options);
    const double scaling = 1.0 / std::sqrt(static_cast<double>(head_dim));
    const at::Tensor fast = AttentionPlan(Attention::kSdpa, segments, device,
                                          dtype, true)(q, k, v, scaling);
    const at::Tensor exact = AttentionPlan(Attention::kEager, segments, device,
                                           dtype, false)(q, k, v, scaling);
    const double err =
        (fast.to(at::kFloat) - exact.to(at::kFloat)).abs().max().item<double>();
    if (!(err < 2e-2)) {
      *why = "the variable-length kernel disagrees with eager attention by " +
             std::to_string(err);
      return false;
    }
    return true;
  } catch (const c10::Error& e) {
    *why = std::string("the variable-length kernel failed: ") +
           e.what_without_backtrace();
    return false;
  }
}

}  // namespace mesa_anyjev::model
