#include "server/model/attention.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace mesa_anyjev::model {
namespace {

// A group's item (its rows x all its keys) may cost this much more than what
// its rows see: past that its suffixes split, each part reading the prefix
// again (on the annotation workload 1.2 ran faster than 1.1 and 1.35).
constexpr double kGroupSlack = 1.2;
// A bucket's padded [B, Tq, Tk] may cost this much more than its items'
// Tq x Tk (causal ones, whose kernel skips what is masked, more), and no
// more than this many elements per head.
constexpr double kMaskedPadSlack = 1.1;
constexpr double kCausalPadSlack = 1.5;
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
                             at::Device device, at::ScalarType dtype,
                             bool varlen)
    : kind_(kind),
      varlen_(varlen),
      cpu_flash_(kind == Attention::kSdpa && device.is_cpu()) {
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
  // Segments with no context take sdpa's causal kernel, without a mask.
  std::vector<Item> masked, causal;
  for (Item& item : MakeItems(segments)) {
    const bool own_only = item.segments == 1 &&
                          item.rows == static_cast<int64_t>(item.keys.size());
    (kind_ == Attention::kSdpa && own_only ? causal : masked)
        .push_back(std::move(item));
  }
  buckets_ = MakeBuckets(std::move(masked), false, device, dtype);
  for (Bucket& b : MakeBuckets(std::move(causal), true, device, dtype)) {
    buckets_.push_back(std::move(b));
  }
  in_order_ = buckets_.size() == 1 && buckets_[0].rows_in_order;
}

std::vector<AttentionPlan::Item> AttentionPlan::MakeItems(
    const std::vector<SegmentKeys>& segments) {
  std::vector<Item> items;
  int64_t row = 0;
  // The group items.back() holds, and its shared keys: a later segment of
  // that group joins it while the padded area stays within the slack.
  int64_t open_id = -1, open_shared = 0;
  for (const SegmentKeys& seg : segments) {
    const std::vector<int64_t>& keys = *seg.keys;
    const int64_t n = static_cast<int64_t>(keys.size()), l = seg.length;
    const int64_t shared =
        seg.shared_id >= 0 ? std::min(seg.shared_length, n) : n;
    // Row i sees n - l + i + 1 of the segment's keys.
    const int64_t visible = l * (n - l) + l * (l + 1) / 2;
    Item* item = nullptr;
    if (seg.shared_id >= 0 && seg.shared_id == open_id &&
        shared == open_shared) {
      Item& open = items.back();
      const double rows = static_cast<double>(open.rows + l);
      const double cols = static_cast<double>(open.keys.size()) +
                          static_cast<double>(n - shared);
      if (rows * cols <=
              kGroupSlack * static_cast<double>(open.visible + visible) &&
          std::equal(keys.begin(), keys.begin() + shared, open.keys.begin())) {
        item = &open;
      }
    }
    if (item == nullptr) {
      items.push_back(
          {row, 0, {keys.begin(), keys.begin() + shared}, {}, 0, 0});
      item = &items.back();
      open_id = seg.shared_id;
      open_shared = shared;
    }
    const int64_t own = static_cast<int64_t>(item->keys.size());
    item->keys.insert(item->keys.end(), keys.begin() + shared, keys.end());
    for (int64_t i = 0; i < l; ++i) {
      const int64_t see = n - l + i + 1;
      item->see.push_back(
          {std::min(see, shared), own, std::max<int64_t>(0, see - shared)});
    }
    item->rows += l;
    item->visible += visible;
    ++item->segments;
    row += l;
  }
  return items;
}

std::vector<AttentionPlan::Bucket> AttentionPlan::MakeBuckets(
    std::vector<Item> items, bool causal, at::Device device,
    at::ScalarType dtype) const {
  auto area = [](const Item& item) {
    return item.rows * static_cast<int64_t>(item.keys.size());
  };
  const double slack = causal ? kCausalPadSlack : kMaskedPadSlack;
  // Longest queries first; a bucket grows while padding stays bounded.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) {
                     if (a.rows != b.rows) return a.rows > b.rows;
                     return a.keys.size() > b.keys.size();
                   });
  std::vector<std::vector<const Item*>> groups;
  int64_t tq = 0, tk = 0, real = 0;
  for (const Item& item : items) {
    const int64_t l = item.rows, k = static_cast<int64_t>(item.keys.size());
    if (!groups.empty()) {
      const int64_t b = static_cast<int64_t>(groups.back().size()) + 1;
      const int64_t padded = b * std::max(tq, l) * std::max(tk, k);
      if (padded <= slack * static_cast<double>(real + area(item)) &&
          padded <= kMaxBucketElements) {
        groups.back().push_back(&item);
        tq = std::max(tq, l);
        tk = std::max(tk, k);
        real += area(item);
        continue;
      }
    }
    groups.push_back({&item});
    tq = l;
    tk = k;
    real = area(item);
  }
  std::vector<Bucket> buckets;
  for (const auto& members : groups) {
    Bucket bucket;
    bucket.b = static_cast<int64_t>(members.size());
    bucket.causal = causal;
    for (const Item* item : members) {
      bucket.tq = std::max(bucket.tq, item->rows);
      bucket.tk = std::max(bucket.tk, static_cast<int64_t>(item->keys.size()));
    }
    std::vector<int64_t> q_index, key_slots, keep, out_rows;
    at::Tensor allowed;
    if (!causal) {
      allowed = at::zeros({bucket.b, 1, bucket.tq, bucket.tk}, at::kBool);
    }
    bool* mask = causal ? nullptr : allowed.data_ptr<bool>();
    for (int64_t r = 0; r < bucket.b; ++r) {
      const Item& item = *members[static_cast<size_t>(r)];
      const int64_t l = item.rows, k = static_cast<int64_t>(item.keys.size());
      for (int64_t i = 0; i < bucket.tq; ++i) {
        // A pad query repeats a real row and sees key 0 only (no NaN).
        q_index.push_back(item.row0 + std::min(i, l - 1));
        if (i < l) {
          keep.push_back(r * bucket.tq + i);
          out_rows.push_back(item.row0 + i);
        }
        if (mask != nullptr) {
          bool* row = mask + (r * bucket.tq + i) * bucket.tk;
          if (i < l) {
            const Visible& v = item.see[static_cast<size_t>(i)];
            std::fill(row, row + v.shared, true);
            std::fill(row + v.own, row + v.own + v.owned, true);
          } else {
            row[0] = true;
          }
        }
      }
      // A pad key repeats a real, written one (masked out): never garbage.
      for (int64_t j = 0; j < bucket.tk; ++j) {
        key_slots.push_back(item.keys[static_cast<size_t>(std::min(j, k - 1))]);
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
    if (bucket.b == 1) bucket.first_row = members[0]->row0;
    if (!causal) {
      if (kind_ == Attention::kEager) {
        bucket.mask = allowed.logical_not();  // true = may not attend
      } else if (cpu_flash_) {
        // The CPU flash kernel adds a mask of the queries' dtype.
        bucket.mask =
            at::zeros(allowed.sizes(), at::TensorOptions(dtype))
                .masked_fill_(allowed.logical_not(),
                              -std::numeric_limits<float>::infinity());
      } else {
        bucket.mask = allowed;  // true = may attend
      }
      bucket.mask = bucket.mask.to(device);
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

at::Tensor AttentionPlan::Padded(const Bucket& bucket, const at::Tensor& q,
                                 const at::Tensor& k_pool,
                                 const at::Tensor& v_pool,
                                 double scaling) const {
  const int64_t heads = q.size(1), d = q.size(2), kv = k_pool.size(1);
  const int64_t b = bucket.b, tq = bucket.tq, tk = bucket.tk;
  // [B, heads, Tq, D] queries (one item's: a view of its rows), [B, kv, Tk,
  // D] keys and values.
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
  const std::optional<at::Tensor> mask =
      bucket.causal ? std::nullopt : std::optional<at::Tensor>(bucket.mask);
  at::Tensor out;
  if (cpu_flash_) {
    // The CPU flash kernel reads each kv head for its query heads.
    out = std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(
        qb, kb, vb, /*dropout_p=*/0.0, bucket.causal, mask, scaling));
  } else if (kind_ == Attention::kSdpa) {
    out = at::scaled_dot_product_attention(
        qb, RepeatKv(kb, heads / kv), RepeatKv(vb, heads / kv), mask,
        /*dropout_p=*/0.0, bucket.causal, scaling);
  } else {
    at::Tensor scores =
        at::matmul(qb, RepeatKv(kb, heads / kv).transpose(2, 3)) * scaling;
    scores = scores.masked_fill(bucket.mask,
                                -std::numeric_limits<float>::infinity());
    const at::Tensor probs =
        at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    out = at::matmul(probs, RepeatKv(vb, heads / kv));
  }
  // [B, heads, Tq, D] -> [B * Tq, heads, D] -> the real rows.
  out = out.transpose(1, 2).reshape({b * tq, heads, d});
  return bucket.first_row >= 0 ? out : out.index_select(0, bucket.keep);
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
