#include "server/model/attention.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace mesa_anyjev::model {
namespace {

// A bucket's padded [B, Tq, Tk] may cost this much more than its segments'
// real Tq x Tk, and no more than this many elements per head.
constexpr double kPadSlack = 1.5;
constexpr int64_t kMaxBucketElements = int64_t{1} << 21;

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

const char* AttentionName(Attention attention) {
  return attention == Attention::kSdpa ? "sdpa" : "eager";
}

AttentionPlan::AttentionPlan(Attention kind,
                             const std::vector<SegmentKeys>& segments,
                             at::Device device, bool varlen)
    : kind_(kind), varlen_(varlen) {
  std::vector<int64_t> first(segments.size(), 0);  // first row in q
  for (size_t s = 1; s < segments.size(); ++s) {
    first[s] = first[s - 1] + segments[s - 1].length;
  }
  if (varlen_) {
    std::vector<int64_t> cu_q{0}, cu_k{0}, keys;
    for (const SegmentKeys& s : segments) {
      cu_q.push_back(cu_q.back() + s.length);
      cu_k.push_back(cu_k.back() + static_cast<int64_t>(s.keys->size()));
      keys.insert(keys.end(), s.keys->begin(), s.keys->end());
      max_q_ = std::max(max_q_, s.length);
      max_k_ = std::max(max_k_, static_cast<int64_t>(s.keys->size()));
    }
    cu_q_ = Longs(cu_q, device).to(at::kInt);
    cu_k_ = Longs(cu_k, device).to(at::kInt);
    all_keys_ = Longs(keys, device);
    return;
  }
  const bool sdpa = kind_ == Attention::kSdpa;
  // CPU sdpa reads a group's shared prefix once for all its suffixes.
  const bool cascade = sdpa && device.is_cpu();
  std::vector<Item> masked, causal, own;
  std::vector<std::pair<int64_t, std::vector<size_t>>> groups;  // id, members
  for (size_t s = 0; s < segments.size(); ++s) {
    const SegmentKeys& seg = segments[s];
    const int64_t n = static_cast<int64_t>(seg.keys->size());
    const Item whole{first[s], seg.length, seg.keys->data(), n};
    if (cascade && seg.shared_id >= 0 && seg.shared_length > 0) {
      own.push_back({first[s], seg.length, seg.keys->data() + seg.shared_length,
                     n - seg.shared_length});
      if (groups.empty() || groups.back().first != seg.shared_id) {
        groups.push_back({seg.shared_id, {}});
      }
      groups.back().second.push_back(s);
    } else if (sdpa && n == seg.length) {
      causal.push_back(whole);
    } else {
      masked.push_back(whole);
    }
  }
  buckets_ = MakeBuckets(masked, false, sdpa, device);
  for (Bucket& b : MakeBuckets(causal, true, sdpa, device)) {
    buckets_.push_back(std::move(b));
  }
  in_order_ = own.empty() && buckets_.size() == 1 && buckets_[0].rows_in_order;
  own_buckets_ = MakeBuckets(own, true, sdpa, device);
  for (const auto& [id, members] : groups) {
    std::vector<int64_t> rows;
    for (size_t s : members) {
      for (int64_t i = 0; i < segments[s].length; ++i) {
        rows.push_back(first[s] + i);
      }
    }
    const SegmentKeys& lead = segments[members.front()];
    shared_.push_back(
        {Longs(rows, device),
         Longs(std::vector<int64_t>(lead.keys->begin(),
                                    lead.keys->begin() + lead.shared_length),
               device)});
  }
}

std::vector<AttentionPlan::Bucket> AttentionPlan::MakeBuckets(
    std::vector<Item> items, bool causal, bool sdpa, at::Device device) {
  // Longest queries first; a bucket grows while padding stays bounded.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) {
                     if (a.length != b.length) return a.length > b.length;
                     return a.n > b.n;
                   });
  std::vector<std::vector<const Item*>> groups;
  int64_t tq = 0, tk = 0, real = 0;
  for (const Item& item : items) {
    const int64_t l = item.length, k = item.n;
    if (!groups.empty()) {
      const int64_t b = static_cast<int64_t>(groups.back().size()) + 1;
      const int64_t padded = b * std::max(tq, l) * std::max(tk, k);
      if (padded <= kPadSlack * static_cast<double>(real + l * k) &&
          padded <= kMaxBucketElements) {
        groups.back().push_back(&item);
        tq = std::max(tq, l);
        tk = std::max(tk, k);
        real += l * k;
        continue;
      }
    }
    groups.push_back({&item});
    tq = l;
    tk = k;
    real = l * k;
  }
  std::vector<Bucket> buckets;
  for (const auto& members : groups) {
    Bucket bucket;
    bucket.b = static_cast<int64_t>(members.size());
    bucket.causal = causal && sdpa;
    for (const Item* item : members) {
      bucket.tq = std::max(bucket.tq, item->length);
      bucket.tk = std::max(bucket.tk, item->n);
    }
    std::vector<int64_t> q_index, key_slots, keep, out_rows;
    at::Tensor masked;
    if (!bucket.causal) {
      masked = at::ones({bucket.b, 1, bucket.tq, bucket.tk}, at::kBool);
    }
    for (int64_t r = 0; r < bucket.b; ++r) {
      const Item& item = *members[static_cast<size_t>(r)];
      const int64_t l = item.length, k = item.n;
      for (int64_t i = 0; i < bucket.tq; ++i) {
        // A pad query repeats a real row and sees key 0 only (no NaN).
        q_index.push_back(item.row0 + std::min(i, l - 1));
        if (i < l) {
          keep.push_back(r * bucket.tq + i);
          out_rows.push_back(item.row0 + i);
        }
      }
      if (!bucket.causal) {
        auto m = masked.accessor<bool, 4>();
        for (int64_t i = 0; i < bucket.tq; ++i) {
          const int64_t visible = i < l ? k - l + i + 1 : 1;
          for (int64_t j = 0; j < visible; ++j) m[r][0][i][j] = false;
        }
      }
      // A pad key repeats a real, written one (masked out): never garbage.
      for (int64_t j = 0; j < bucket.tk; ++j) {
        key_slots.push_back(item.keys[std::min(j, k - 1)]);
      }
    }
    bucket.q_index = Longs(q_index, device);
    bucket.key_slots = Longs(key_slots, device);
    bucket.keep = Longs(keep, device);
    bucket.out_rows = Longs(out_rows, device);
    bucket.rows_in_order = true;
    for (size_t i = 0; i < out_rows.size(); ++i) {
      bucket.rows_in_order &= out_rows[i] == static_cast<int64_t>(i);
    }
    if (!bucket.causal) {
      bucket.masked = masked.to(device);
      if (sdpa) bucket.allowed = bucket.masked.logical_not();
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

at::Tensor AttentionPlan::Padded(const Bucket& bucket, const at::Tensor& q,
                                 const at::Tensor& k_pool,
                                 const at::Tensor& v_pool, double scaling,
                                 at::Tensor* lse) const {
  const int64_t heads = q.size(1), d = q.size(2), kv = k_pool.size(1);
  const int64_t b = bucket.b, tq = bucket.tq, tk = bucket.tk;
  // [B, heads, Tq, D] queries, [B, heads, Tk, D] keys and values.
  const at::Tensor qb =
      q.index_select(0, bucket.q_index).view({b, tq, heads, d}).transpose(1, 2);
  const at::Tensor kb = RepeatKv(k_pool.index_select(0, bucket.key_slots)
                                     .view({b, tk, kv, d})
                                     .transpose(1, 2),
                                 heads / kv);
  const at::Tensor vb = RepeatKv(v_pool.index_select(0, bucket.key_slots)
                                     .view({b, tk, kv, d})
                                     .transpose(1, 2),
                                 heads / kv);
  at::Tensor out;
  if (lse != nullptr) {
    // The CPU flash kernel returns its log-sum-exp [B, heads, Tq].
    at::Tensor l;
    std::tie(out, l) = at::_scaled_dot_product_flash_attention_for_cpu(
        qb, kb, vb, /*dropout_p=*/0.0, bucket.causal,
        bucket.causal ? std::nullopt
                      : std::optional<at::Tensor>(bucket.allowed),
        scaling);
    *lse =
        l.transpose(1, 2).reshape({b * tq, heads}).index_select(0, bucket.keep);
  } else if (kind_ == Attention::kSdpa) {
    out = at::scaled_dot_product_attention(
        qb, kb, vb,
        bucket.causal ? std::nullopt
                      : std::optional<at::Tensor>(bucket.allowed),
        /*dropout_p=*/0.0, bucket.causal, scaling);
  } else {
    at::Tensor scores = at::matmul(qb, kb.transpose(2, 3)) * scaling;
    scores = scores.masked_fill(bucket.masked,
                                -std::numeric_limits<float>::infinity());
    const at::Tensor probs =
        at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    out = at::matmul(probs, vb);
  }
  // [B, heads, Tq, D] -> [B * Tq, heads, D] -> the real rows.
  return out.transpose(1, 2)
      .reshape({b * tq, heads, d})
      .index_select(0, bucket.keep);
}

void AttentionPlan::AttendShared(const at::Tensor& q, const at::Tensor& k_pool,
                                 const at::Tensor& v_pool, double scaling,
                                 at::Tensor& out) const {
  const int64_t heads = q.size(1), d = q.size(2), kv = k_pool.size(1);
  const int64_t rep = heads / kv;
  // Each row's own part first: [N, heads, D] and its log-sum-exp.
  at::Tensor own = at::empty_like(q);
  at::Tensor own_lse =
      at::empty({q.size(0), heads}, q.options().dtype(at::kFloat));
  for (const Bucket& bucket : own_buckets_) {
    at::Tensor lse;
    own.index_copy_(0, bucket.out_rows,
                    Padded(bucket, q, k_pool, v_pool, scaling, &lse));
    own_lse.index_copy_(0, bucket.out_rows, lse);
  }
  for (const Shared& group : shared_) {
    const int64_t m = group.q_rows.size(0), p = group.key_slots.size(0);
    // [M, heads, D] -> [1, kv, rep * M, D]: one query axis per kv head.
    const at::Tensor folded = q.index_select(0, group.q_rows)
                                  .view({m, kv, rep, d})
                                  .permute({1, 2, 0, 3})
                                  .reshape({1, kv, rep * m, d});
    const at::Tensor pk = k_pool.index_select(0, group.key_slots)
                              .view({1, p, kv, d})
                              .transpose(1, 2);
    const at::Tensor pv = v_pool.index_select(0, group.key_slots)
                              .view({1, p, kv, d})
                              .transpose(1, 2);
    auto [o1, lse1] = at::_scaled_dot_product_flash_attention_for_cpu(
        folded, pk, pv, /*dropout_p=*/0.0, /*is_causal=*/false, std::nullopt,
        scaling);
    o1 = o1.reshape({kv, rep, m, d})
             .permute({2, 0, 1, 3})
             .reshape({m, heads, d});
    lse1 = lse1.reshape({kv, rep, m}).permute({2, 0, 1}).reshape({m, heads, 1});
    const at::Tensor o2 = own.index_select(0, group.q_rows);
    const at::Tensor lse2 = own_lse.index_select(0, group.q_rows).unsqueeze(-1);
    // Two softmaxes over disjoint keys merged into one over all of them.
    const at::Tensor top = at::maximum(lse1, lse2);
    const at::Tensor w1 = (lse1 - top).exp(), w2 = (lse2 - top).exp();
    out.index_copy_(
        0, group.q_rows,
        ((o1.to(at::kFloat) * w1 + o2.to(at::kFloat) * w2) / (w1 + w2))
            .to(q.scalar_type()));
  }
}

at::Tensor AttentionPlan::operator()(const at::Tensor& q,
                                     const at::Tensor& k_pool,
                                     const at::Tensor& v_pool,
                                     double scaling) const {
  if (varlen_) {
    const at::Tensor k = k_pool.index_select(0, all_keys_);
    const at::Tensor v = v_pool.index_select(0, all_keys_);
    // Causal with more keys than queries aligns the mask to the end.
    return std::get<0>(at::_flash_attention_forward(
        q.contiguous(), k, v, cu_q_, cu_k_, max_q_, max_k_,
        /*dropout_p=*/0.0, /*is_causal=*/true, /*return_debug_mask=*/false,
        scaling));
  }
  if (in_order_) return Padded(buckets_[0], q, k_pool, v_pool, scaling);
  at::Tensor out = at::empty_like(q);
  for (const Bucket& bucket : buckets_) {
    out.index_copy_(0, bucket.out_rows,
                    Padded(bucket, q, k_pool, v_pool, scaling));
  }
  if (!shared_.empty()) AttendShared(q, k_pool, v_pool, scaling, out);
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
                                          true)(q, k, v, scaling);
    const at::Tensor exact = AttentionPlan(Attention::kEager, segments, device,
                                           false)(q, k, v, scaling);
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
