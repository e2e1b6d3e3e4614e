// Attention over a packed pass: the queries of every segment of the pass in
// one [N, heads, D] tensor (segments consecutive, in order), the keys and
// values in the engine's pool [slots, kv, D]. Each segment's queries attend
// to its list of key slots (its context, then its own tokens), causally
// aligned to the end of that list. The plan (buckets, gather indices, masks)
// is built once per pass and reused by every layer; it is the same code on
// every device, so only the kernel call differs:
//   eager  - transformers' eager math (matmul, float32 softmax): exact, the
//            default;
//   sdpa   - libtorch's scaled_dot_product_attention with the same masks;
//            on CUDA the variable-length flash kernel over cumulative
//            sequence lengths where the wheel has it (probed at load), the
//            masked kernel otherwise.
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
  int64_t length = 0;                         // its queries: its new tokens
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
  // Segments padded to [B, Tq] queries x [B, Tk] keys, one kernel call.
  struct Bucket {
    int64_t b = 0, tq = 0, tk = 0;
    at::Tensor q_index;    // [B * Tq] rows of q (pads repeat a real row)
    at::Tensor key_slots;  // [B * Tk] pool slots (pads repeat a real key)
    at::Tensor masked;     // [B, 1, Tq, Tk] bool, true = may not attend
    at::Tensor allowed;    // !masked, for sdpa
    at::Tensor keep;       // [n] real rows of the padded [B * Tq]
    at::Tensor out_rows;   // [n] their rows in q
  };
  at::Tensor Padded(const Bucket& bucket, const at::Tensor& q,
                    const at::Tensor& k_pool, const at::Tensor& v_pool,
                    double scaling) const;

  Attention kind_;
  bool varlen_ = false;
  std::vector<Bucket> buckets_;
  bool in_order_ = false;
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
