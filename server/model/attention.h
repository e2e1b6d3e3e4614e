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
  // `route`: chosen once, at load (ChooseRoute). `dtype`: the queries'
  // (CPU sdpa takes its mask in it). The plan's index arrays are staged in
  // `upload`, which the pass copies to the device once; Bind reads them
  // from there before the plan is used.
  AttentionPlan(AttentionRoute route, const PassKeys& keys, at::Device device,
                at::ScalarType dtype, PassUpload& upload);
  AttentionPlan(const AttentionBuckets& plan, at::Device device,
                at::ScalarType dtype, PassUpload& upload);
  void Bind(const PassUpload& upload);
  // A plan with an upload of its own, bound (the load-time probe, tests).
  static AttentionPlan Standalone(AttentionRoute route, const PassKeys& keys,
                                  at::Device device, at::ScalarType dtype);
  // The variable-length route over sequences already on the device (a
  // captured graph's static buffer, graph_pass.h): cu_q and cu_k int64
  // [S + 1], keys int64 [K], with fixed maxima.
  static AttentionPlan VarlenOn(const at::Tensor& cu_q, const at::Tensor& cu_k,
                                const at::Tensor& keys, int64_t max_q,
                                int64_t max_k);

  // q [N, heads, D] after RoPE; pools [slots, kv, D] with this pass's keys
  // and values written -> [N, heads, D].
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k_pool,
                        const at::Tensor& v_pool, double scaling) const;

 private:
  AttentionPlan() = default;
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
  // A VarlenLayout on the device.
  struct Sequences {
    at::Tensor cu_q, cu_k, keys;  // int32, int32, int64 (pool slots)
    int64_t max_q = 0, max_k = 0;
    PassUpload::Handle staged[3];
    bool empty() const { return max_q == 0; }
  };
  static Sequences Staged(const VarlenLayout& layout, PassUpload& upload);
  static void Bind(Sequences& seq, const PassUpload& upload);
  // Attention of q's rows over each sequence's keys gathered from the pool:
  // [rows, heads, D] and its log-sum-exp [heads, rows] (float32).
  std::pair<at::Tensor, at::Tensor> Varlen(const Sequences& seq,
                                           const at::Tensor& q,
                                           const at::Tensor& k_pool,
                                           const at::Tensor& v_pool,
                                           double scaling, bool causal) const;
  at::Tensor Cascade(const at::Tensor& q, const at::Tensor& k_pool,
                     const at::Tensor& v_pool, double scaling) const;

  AttentionRoute route_ = AttentionRoute::kEager;
  std::vector<Bucket> buckets_;
  bool in_order_ = false;  // one bucket holding every row in order
  // kVarlen: `own` alone; kCascade: `own` and `shared` over `shared_rows`.
  Sequences own_, shared_;
  at::Tensor shared_rows_;
  PassUpload::Handle staged_shared_rows_;
};

// The variable-length kernel's arguments on the CPU, for tests: the same
// math as eager attention per sequence, with its log-sum-exp. q [rows,
// heads, D], k and v [keys, kv, D] gathered, cu_* int32 on the CPU.
std::pair<at::Tensor, at::Tensor> VarlenReference(const at::Tensor& q,
                                                  const at::Tensor& k,
                                                  const at::Tensor& v,
                                                  const at::Tensor& cu_q,
                                                  const at::Tensor& cu_k,
                                                  double scaling, bool causal);

// Whether the CUDA variable-length kernel runs here and equals the masked
// path on a small case (false with the reason otherwise); with `cascade`,
// the kCascade route on a case with a shared context.
bool VarlenAttentionWorks(at::Device device, at::ScalarType dtype,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          std::string* why, bool cascade = false);

}  // namespace mesa_anyjev::model
