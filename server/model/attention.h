// Attention over a packed pass: the queries of every segment of the pass in
// one [N, heads, D] tensor (segments consecutive, in order), the keys and
// values in the engine's pool [slots, kv, D]. Each segment's queries attend
// to the keys pass_keys.h says it sees (its context's, then its own
// tokens'), causally aligned to the end. The plan
// (server/model/attention_buckets.h: the route, items and buckets) is made once
// per pass and turned into gather indices and masks here, which every layer
// reuses; it is the same code on every device, so only the kernel call differs:
//   eager  - transformers' eager math (matmul, float32 softmax): exact, the
//            default;
//   sdpa   - libtorch's scaled_dot_product_attention with the same masks
//            (segments with no context: its causal kernel, no mask); on the
//            CPU its flash kernel is called with the kv heads as they are
//            (no copy per query head); on CUDA the variable-length flash
//            kernel over cumulative sequence lengths where the wheel has it
//            (probed at load), the masked kernel otherwise.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "server/model/attention_buckets.h"
#include "server/model/pass_upload.h"

namespace mesa_anyjev::model {

class AttentionPlan {
 public:
  // `varlen`: use the CUDA variable-length kernel (sdpa on CUDA, probed).
  // `dtype`: the queries' (CPU sdpa takes its mask in it). The plan's index
  // arrays are staged in `upload`, which the pass copies to the device
  // once; Bind reads them from there before the plan is used.
  AttentionPlan(Attention kind, const PassKeys& keys, at::Device device,
                at::ScalarType dtype, bool varlen, PassUpload& upload);
  AttentionPlan(const AttentionBuckets& plan, at::Device device,
                at::ScalarType dtype, PassUpload& upload);
  void Bind(const PassUpload& upload);
  // A plan with an upload of its own, bound (the load-time probe, tests).
  static AttentionPlan Standalone(Attention kind, const PassKeys& keys,
                                  at::Device device, at::ScalarType dtype,
                                  bool varlen);

  // q [N, heads, D] after RoPE; pools [slots, kv, D] with this pass's keys
  // and values written -> [N, heads, D].
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k_pool,
                        const at::Tensor& v_pool, double scaling) const;

 private:
  // A PlannedBucket on the device.
  struct Bucket {
    int64_t b = 0, tq = 0, tk = 0;
    bool causal = false;     // no mask: the kernel's causal one
    int64_t first_row = -1;  // one item: its rows are q[first_row, + tq)
    at::Tensor q_index;      // [B * Tq] rows of q (pads repeat a real row)
    at::Tensor key_slots;    // [B * Tk] pool slots (pads repeat a real key)
    at::Tensor mask;         // [B, 1, Tq, Tk] in the route's form
    at::Tensor keep;         // [n] real rows of the padded [B * Tq]
    at::Tensor out_rows;     // [n] their rows in q
    // Where the four index arrays are staged, until Bind.
    PassUpload::Handle staged[4];
  };
  Bucket Staged(const PlannedBucket& planned, at::Device device,
                at::ScalarType dtype, PassUpload& upload) const;
  at::Tensor Mask(const PlannedBucket& planned, at::Device device,
                  at::ScalarType dtype) const;
  // [n, heads, D] for the bucket's real rows.
  at::Tensor Padded(const Bucket& bucket, const at::Tensor& q,
                    const at::Tensor& k_pool, const at::Tensor& v_pool,
                    double scaling) const;
  // [B, heads, Tq, D] from the bucket's padded queries, keys and values.
  at::Tensor Kernel(const Bucket& bucket, const at::Tensor& qb,
                    const at::Tensor& kb, const at::Tensor& vb,
                    double scaling) const;
  at::Tensor Varlen(const at::Tensor& q, const at::Tensor& k_pool,
                    const at::Tensor& v_pool, double scaling) const;

  AttentionRoute route_;
  std::vector<Bucket> buckets_;
  bool in_order_ = false;  // one bucket holding every row in order
  // kVarlen
  at::Tensor cu_q_, cu_k_, all_keys_;
  PassUpload::Handle staged_cu_q_, staged_cu_k_, staged_keys_;
  int64_t max_q_ = 0, max_k_ = 0;
};

// Whether the CUDA variable-length kernel runs here and equals the masked
// path on a small case (false with the reason otherwise).
bool VarlenAttentionWorks(at::Device device, at::ScalarType dtype,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          std::string* why);

}  // namespace mesa_anyjev::model
