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
//            CPU its flash kernel is called with the kv heads as they are
//            (no copy per query head); on CUDA the variable-length flash
//            kernel over cumulative sequence lengths where the wheel has it
//            (probed at load), the masked kernel otherwise.
// The segments of one prompt group (its prefix's last part and its
// suffixes, which share the prefix's keys) run as one item: their rows
// against the prefix's keys once and each suffix's own keys, one mask, so
// the prefix is gathered and read once for all of them, not per suffix.
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
  // Segments with one shared_id share keys[0, shared_length) (a group's
  // prefix): one item attends for all of them.
  int64_t shared_id = -1;
  int64_t shared_length = 0;
};

class AttentionPlan {
 public:
  // `varlen`: use the CUDA variable-length kernel (sdpa on CUDA, probed).
  // `dtype`: the queries' (CPU sdpa takes its mask in it).
  AttentionPlan(Attention kind, const std::vector<SegmentKeys>& segments,
                at::Device device, at::ScalarType dtype, bool varlen);

  // q [N, heads, D] after RoPE; pools [slots, kv, D] with this pass's keys
  // and values written -> [N, heads, D].
  at::Tensor operator()(const at::Tensor& q, const at::Tensor& k_pool,
                        const at::Tensor& v_pool, double scaling) const;

 private:
  // Query rows [row0, row0 + rows) against the key slots `keys`; row i sees
  // keys [0, see[i].shared) and [see[i].own, see[i].own + see[i].owned).
  struct Visible {
    int64_t shared = 0, own = 0, owned = 0;
  };
  struct Item {
    int64_t row0 = 0, rows = 0;
    std::vector<int64_t> keys;
    std::vector<Visible> see;
    int64_t visible = 0;  // the sum of what its rows see
    int64_t segments = 0;
  };
  // Items padded to [B, Tq] queries x [B, Tk] keys, one kernel call.
  struct Bucket {
    int64_t b = 0, tq = 0, tk = 0;
    // Every item is one segment attending to its own tokens only: the
    // kernel's causal mask holds for right-padded rows, and none is built.
    bool causal = false;
    at::Tensor q_index;          // [B * Tq] rows of q (pads repeat a real row)
    at::Tensor key_slots;        // [B * Tk] pool slots (pads repeat a real key)
    at::Tensor mask;             // [B, 1, Tq, Tk]: see MakeBuckets
    at::Tensor keep;             // [n] real rows of the padded [B * Tq]
    at::Tensor out_rows;         // [n] their rows in q
    bool rows_in_order = false;  // out_rows is 0, 1, ..., n - 1
    int64_t first_row = -1;      // one item: its rows are q[first_row, + tq)
  };
  // The segments' items: a group's segments in one item while its padded
  // area stays within the slack of what its rows see.
  static std::vector<Item> MakeItems(const std::vector<SegmentKeys>& segments);
  std::vector<Bucket> MakeBuckets(std::vector<Item> items, bool causal,
                                  at::Device device,
                                  at::ScalarType dtype) const;
  // [n, heads, D] for the bucket's real rows.
  at::Tensor Padded(const Bucket& bucket, const at::Tensor& q,
                    const at::Tensor& k_pool, const at::Tensor& v_pool,
                    double scaling) const;

  Attention kind_;
  bool varlen_ = false;
  // sdpa on the CPU: the flash kernel called directly (masks in the
  // queries' dtype, kv heads as they are).
  bool cpu_flash_ = false;
  std::vector<Bucket> buckets_;
  bool in_order_ = false;  // one bucket holding every row in order
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
