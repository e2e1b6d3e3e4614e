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
}  // namespace

AttentionPlan::AttentionPlan(AttentionRoute route, const PassKeys& keys,
                             at::Device device, at::ScalarType dtype,
                             PassUpload& upload)
    : AttentionPlan(PlanAttentionBuckets(route, keys), device, dtype, upload) {}

AttentionPlan::AttentionPlan(const AttentionBuckets& plan, at::Device device,
                             at::ScalarType dtype, PassUpload& upload)
    : route_(plan.route), in_order_(plan.in_order) {
  if (route_ == AttentionRoute::kVarlen) {
    own_ = Staged(plan.varlen, upload);
    return;
  }
  if (route_ == AttentionRoute::kCascade) {
    own_ = Staged(plan.cascade.own, upload);
    shared_ = Staged(plan.cascade.shared, upload);
    staged_shared_rows_ = upload.Stage(plan.cascade.shared_rows);
    return;
  }
  for (const PlannedBucket& planned : plan.buckets) {
    buckets_.push_back(Staged(planned, device, dtype, upload));
  }
}

void AttentionPlan::Bind(const PassUpload& upload) {
  if (route_ == AttentionRoute::kVarlen || route_ == AttentionRoute::kCascade) {
    Bind(own_, upload);
    Bind(shared_, upload);
    if (route_ == AttentionRoute::kCascade) {
      shared_rows_ = upload.View(staged_shared_rows_);
    }
    return;
  }
  for (Bucket& bucket : buckets_) {
    bucket.q_index = upload.View(bucket.staged[0]);
    bucket.key_slots = upload.View(bucket.staged[1]);
    bucket.keep = upload.View(bucket.staged[2]);
    bucket.out_rows = upload.View(bucket.staged[3]);
  }
}

AttentionPlan AttentionPlan::Standalone(AttentionRoute route,
                                        const PassKeys& keys, at::Device device,
                                        at::ScalarType dtype) {
  PassUpload upload;
  AttentionPlan plan(route, keys, device, dtype, upload);
  upload.Upload(device);
  plan.Bind(upload);
  return plan;
}

AttentionPlan AttentionPlan::VarlenOn(const at::Tensor& cu_q,
                                      const at::Tensor& cu_k,
                                      const at::Tensor& keys, int64_t max_q,
                                      int64_t max_k) {
  AttentionPlan plan;
  plan.route_ = AttentionRoute::kVarlen;
  plan.own_.cu_q = cu_q.to(at::kInt);
  plan.own_.cu_k = cu_k.to(at::kInt);
  plan.own_.keys = keys;
  plan.own_.max_q = max_q;
  plan.own_.max_k = max_k;
  return plan;
}

AttentionPlan::Bucket AttentionPlan::Staged(const PlannedBucket& planned,
                                            at::Device device,
                                            at::ScalarType dtype,
                                            PassUpload& upload) const {
  const BucketIndices indices = GatherIndices(planned);
  Bucket bucket;
  bucket.b = planned.b();
  bucket.tq = planned.tq;
  bucket.tk = planned.tk;
  bucket.causal = planned.causal;
  bucket.first_row = planned.first_row;
  bucket.staged[0] = upload.Stage(indices.q_index);
  bucket.staged[1] = upload.Stage(indices.key_slots);
  bucket.staged[2] = upload.Stage(indices.keep);
  bucket.staged[3] = upload.Stage(indices.out_rows);
  // Masks (the masked routes only; never the CUDA variable-length one) go
  // in their own dtype.
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

AttentionPlan::Sequences AttentionPlan::Staged(const VarlenLayout& layout,
                                               PassUpload& upload) {
  Sequences seq;
  seq.staged[0] = upload.Stage(layout.cu_q);
  seq.staged[1] = upload.Stage(layout.cu_k);
  seq.staged[2] = upload.Stage(layout.keys);
  seq.max_q = layout.max_q;
  seq.max_k = layout.max_k;
  return seq;
}

void AttentionPlan::Bind(Sequences& seq, const PassUpload& upload) {
  if (seq.empty()) return;
  seq.cu_q = upload.View(seq.staged[0]).to(at::kInt);
  seq.cu_k = upload.View(seq.staged[1]).to(at::kInt);
  seq.keys = upload.View(seq.staged[2]);
}

std::pair<at::Tensor, at::Tensor> AttentionPlan::Varlen(
    const Sequences& seq, const at::Tensor& q, const at::Tensor& k_pool,
    const at::Tensor& v_pool, double scaling, bool causal) const {
  Stages stage("mesa.attention_gather");
  const at::Tensor k = k_pool.index_select(0, seq.keys);
  const at::Tensor v = v_pool.index_select(0, seq.keys);
  stage.Next("mesa.attention");
  if (q.device().is_cpu()) {
    return VarlenReference(q, k, v, seq.cu_q, seq.cu_k, scaling, causal);
  }
  // Causal with more keys than queries aligns the mask to the end. The
  // log-sum-exp comes back unpadded, [heads, rows].
  // The kernel needs only each row's last dimension contiguous, which the
  // heads of the fused q/k/v projection are: no copy of q.
  auto out = at::_flash_attention_forward(
      q.stride(-1) == 1 ? q : q.contiguous(), k, v, seq.cu_q, seq.cu_k,
      seq.max_q, seq.max_k,
      /*dropout_p=*/0.0, causal, /*return_debug_mask=*/false, scaling);
  const at::Tensor& lse = std::get<1>(out);
  TORCH_CHECK(lse.dim() == 2 && lse.size(1) == q.size(0),
              "the variable-length kernel's log-sum-exp is ", lse.sizes(),
              ", not [heads, ", q.size(0), "] (this torch pads it)");
  return {std::get<0>(out), lse};
}

at::Tensor AttentionPlan::Cascade(const at::Tensor& q, const at::Tensor& k_pool,
                                  const at::Tensor& v_pool,
                                  double scaling) const {
  auto [out, own_lse] = Varlen(own_, q, k_pool, v_pool, scaling, true);
  if (shared_.empty()) return out;
  const at::Tensor qs = q.index_select(0, shared_rows_);
  auto [shared_out, shared_lse] =
      Varlen(shared_, qs, k_pool, v_pool, scaling, false);
  // Each row's two softmaxes over disjoint keys, weighed by their mass:
  // [heads, n] -> [n, heads, 1].
  Stages stage("mesa.attention_merge");
  const at::Tensor own_rows = own_lse.index_select(1, shared_rows_);
  const at::Tensor top = at::maximum(own_rows, shared_lse);
  const at::Tensor w_own = (own_rows - top).exp_();
  const at::Tensor w_shared = (shared_lse - top).exp_();
  const at::Tensor total = w_own + w_shared;
  const at::Tensor merged =
      (out.index_select(0, shared_rows_).to(at::kFloat) *
           (w_own / total).t().unsqueeze(-1) +
       shared_out.to(at::kFloat) * (w_shared / total).t().unsqueeze(-1))
          .to(q.scalar_type());
  return out.index_copy_(0, shared_rows_, merged);
}

at::Tensor AttentionPlan::operator()(const at::Tensor& q,
                                     const at::Tensor& k_pool,
                                     const at::Tensor& v_pool,
                                     double scaling) const {
  if (route_ == AttentionRoute::kVarlen) {
    return Varlen(own_, q, k_pool, v_pool, scaling, true).first;
  }
  if (route_ == AttentionRoute::kCascade) {
    return Cascade(q, k_pool, v_pool, scaling);
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

std::pair<at::Tensor, at::Tensor> VarlenReference(const at::Tensor& q,
                                                  const at::Tensor& k,
                                                  const at::Tensor& v,
                                                  const at::Tensor& cu_q,
                                                  const at::Tensor& cu_k,
                                                  double scaling, bool causal) {
  const at::Tensor cq = cu_q.to(at::kLong).cpu(), ck = cu_k.to(at::kLong).cpu();
  const int64_t n = cq.size(0) - 1, heads = q.size(1);
  const int64_t rep = heads / k.size(1);
  std::vector<at::Tensor> outs, lses;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t q0 = cq[b].item<int64_t>(),
                  lq = cq[b + 1].item<int64_t>() - q0;
    const int64_t k0 = ck[b].item<int64_t>(),
                  lk = ck[b + 1].item<int64_t>() - k0;
    // [heads, lq, D] against [heads, lk, D].
    const at::Tensor qb = q.narrow(0, q0, lq).transpose(0, 1).to(at::kFloat);
    const auto heads_of = [&](const at::Tensor& x) {
      return x.narrow(0, k0, lk).repeat_interleave(rep, 1).transpose(0, 1).to(
          at::kFloat);
    };
    at::Tensor scores = at::matmul(qb, heads_of(k).transpose(1, 2)) * scaling;
    if (causal) {
      // Query i sees keys up to lk - lq + i.
      const at::Tensor i = at::arange(lq).unsqueeze(1);
      const at::Tensor j = at::arange(lk).unsqueeze(0);
      scores.masked_fill_(j > i + (lk - lq),
                          -std::numeric_limits<float>::infinity());
    }
    const at::Tensor lse = at::logsumexp(scores, -1);  // [heads, lq]
    outs.push_back(at::matmul((scores - lse.unsqueeze(-1)).exp(), heads_of(v))
                       .transpose(0, 1)
                       .to(q.scalar_type()));
    lses.push_back(lse);
  }
  return {at::cat(outs, 0), at::cat(lses, 1)};
}

namespace {

// One case of the load's probe: the variable-length route (the cascade
// with `cascade`) against eager attention, within bf16's error.
bool ProbeAgrees(const PassKeys& segments, at::Device device,
                 at::ScalarType dtype, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, bool cascade, std::string* why) {
  int64_t rows = 0, keys = 0;
  for (const SegmentKeys& s : segments.segments) {
    rows += s.length;
    for (int64_t j = 0; j < s.start + s.length; ++j) {
      keys = std::max(keys, segments.VisibleSlot(s, j) + 1);
    }
  }
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  at::manual_seed(0);
  const at::Tensor q = at::randn({rows, heads, head_dim}, options);
  const at::Tensor k = at::randn({keys, kv_heads, head_dim}, options);
  const at::Tensor v = at::randn({keys, kv_heads, head_dim}, options);
  const double scaling = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const at::Tensor fast = AttentionPlan::Standalone(
      cascade ? AttentionRoute::kCascade : AttentionRoute::kVarlen, segments,
      device, dtype)(q, k, v, scaling);
  const at::Tensor exact = AttentionPlan::Standalone(
      AttentionRoute::kEager, segments, device, dtype)(q, k, v, scaling);
  const double err =
      (fast.to(at::kFloat) - exact.to(at::kFloat)).abs().max().item<double>();
  if (!(err < 2e-2)) {
    *why = std::string(cascade ? "the cascade" : "the variable-length kernel") +
           " disagrees with eager attention by " + std::to_string(err);
    return false;
  }
  return true;
}

}  // namespace

bool VarlenAttentionWorks(at::Device device, at::ScalarType dtype,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          std::string* why, bool cascade) {
  if (!device.is_cuda()) {
    *why = "the variable-length kernel is CUDA only";
    return false;
  }
  try {
    c10::InferenceMode guard;
    // Two segments: 5 queries over 12 keys, 3 queries over their own 3;
    // for the cascade, two suffixes of 2 and 1 tokens after those 12.
    PassKeys segments;
    segments.contexts = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};
    segments.segments = {{5, 7, 0, {}}, {3, 0, -1, {12, 13, 14}}};
    if (cascade) {
      segments.segments.push_back({2, 12, 0, {15, 16}});
      segments.segments.push_back({1, 12, 0, {17}});
    }
    if (!ProbeAgrees(segments, device, dtype, heads, kv_heads, head_dim,
                     cascade, why)) {
      return false;
    }
    // Also one query a sequence (max_seqlen_q 1, where flash attention
    // returns its log-sum-exp in another layout): one-token suffixes after
    // a cached prefix, as a pass of the next questions' answers takes.
    PassKeys one_each;
    one_each.contexts = segments.contexts;
    one_each.segments = {{1, 12, 0, {12}}, {1, 12, 0, {13}}, {1, 12, 0, {14}}};
    return ProbeAgrees(one_each, device, dtype, heads, kv_heads, head_dim,
                       cascade, why);
  } catch (const c10::Error& e) {
    *why = std::string("the variable-length kernel failed: ") +
           e.what_without_backtrace();
    return false;
  }
}

}  // namespace mesa_anyjev::model
