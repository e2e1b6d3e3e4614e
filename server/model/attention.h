// Attention over a packed pass: the queries of every segment of the pass in
// one [N, heads, D] tensor (segments consecutive, in order), the keys and
// values in the engine's pool [slots, kv, D]. Each segment's queries attend
// to its list of key slots (its context, then its own tokens), causally
// aligned to the end of that list. The plan (buckets, gather indices, masks)
// is built once per pass and reused by every layer; it is the same code on
// every device, so only the kernel call differs:
//   eager  - transformers' eager math (matmul, float32 softmax): exact, the
//            default;
//   sdpa   - libtorch's scaled_dot_product_attention with the same masks
//            (segments with no context: its causal kernel, no mask); on the
//            CPU a group's suffixes read their shared prefix once, merged by
//            log-sum-exp with their own causal part; on CUDA the
//            variable-length flash kernel over cumulative sequence lengths
//            where the wheel has it (probed at load), the masked kernel
//            otherwise.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mesa_anyjev::model {

enum class Attention { kEager, kSdpa };
const char* AttentionName(Attention attention);

// One segment as attention sees it (a view of the engine's plan).
struct SegmentKeys {
  int64_t length = 0;                          // its queries: its new tokens
  const std::vector<int64_t>* keys = nullptr;  // slots, own tokens last
  // Segments with one shared_id share keys[0, shared_length).
  int64_t shared_id = -1;
  int64_t shared_length = 0;
};

class AttentionPlan {
 public:
  // `varlen`: use the CUDA variable-length kernel (sdpa on CUDA, probed).
  AttentionPlan(Attention kind, const std::vector<SegmentKeys>& segments,
                at::Device device, bool varlen);

  // q [N, heads, D] after RoPE; pools [slots, kv, D] with this pass's keys
  // and values written -> [N, heads, D].
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k_pool,
                        const at::Tensor& v_pool, double scaling) const;

 private:
  // Query rows [row0, row0 + length) attending to `n` key slots, causally
  // aligned to their end.
  struct Item {
    int64_t row0 = 0, length = 0;
    const int64_t* keys = nullptr;
    int64_t n = 0;
  };
  // Items padded to [B, Tq] queries x [B, Tk] keys, one kernel call.
  struct Bucket {
    int64_t b = 0, tq = 0, tk = 0;
    // Every item attends to its own tokens only: the kernel's causal mask
    // holds for right-padded rows, and no mask is built.
    bool causal = false;
    at::Tensor q_index;          // [B * Tq] rows of q (pads repeat a real row)
    at::Tensor key_slots;        // [B * Tk] pool slots (pads repeat a real key)
    at::Tensor masked;           // [B, 1, Tq, Tk] bool, true = may not attend
    at::Tensor allowed;          // !masked, for sdpa
    at::Tensor keep;             // [n] real rows of the padded [B * Tq]
    at::Tensor out_rows;         // [n] their rows in q
    bool rows_in_order = false;  // out_rows is 0, 1, ..., n - 1
  };
  // A group's suffixes on CPU sdpa: their queries against the shared prefix
  // in one unmasked call (rows and heads folded, the prefix read once, not
  // copied per row), merged by log-sum-exp with their own causal part.
  struct Shared {
    at::Tensor q_rows;     // [M] rows of q
    at::Tensor key_slots;  // [P] the prefix's slots
  };
  static std::vector<Bucket> MakeBuckets(std::vector<Item> items, bool causal,
                                         bool sdpa, at::Device device);
  // [n, heads, D] for the bucket's real rows, and with `lse` their
  // log-sum-exp [n, heads] (sdpa only).
  at::Tensor Padded(const Bucket& bucket, const at::Tensor& q,
                    const at::Tensor& k_pool, const at::Tensor& v_pool,
                    double scaling, at::Tensor* lse = nullptr) const;
  void AttendShared(const at::Tensor& q, const at::Tensor& k_pool,
                    const at::Tensor& v_pool, double scaling,
                    at::Tensor& out) const;

  Attention kind_;
  bool varlen_ = false;
  std::vector<Bucket> buckets_;      // rows not in a Shared group
  bool in_order_ = false;            // one bucket holding every row in order
  std::vector<Bucket> own_buckets_;  // the Shared rows' own parts
  std::vector<Shared> shared_;
  // varlen
  at::Tensor cu_q_, cu_k_, all_keys_;
  int64_t max_q_ = 0, max_k_ = 0;
};

// Whether the CUDA variable-length kernel runs here and equals the masked
// path on a small case (false with the reason otherwise).
bool VarlenAttentionWorks(at::Device device, at::ScalarType dtype,
                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                          std::string* why);

}  // namespace mesa_anyjev::model
