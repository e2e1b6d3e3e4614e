#include "server/model/attention_buckets.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::model {
namespace {

constexpr util::EnumName<Attention> kAttentionNames[] = {
    {Attention::kEager, "eager"}, {Attention::kSdpa, "sdpa"}};
static_assert(util::NamesEvery(kAttentionNames, Attention::kSdpa));

constexpr util::EnumName<AttentionRoute> kAttentionRouteNames[] = {
    {AttentionRoute::kEager, "eager"},
    {AttentionRoute::kSdpa, "sdpa"},
    {AttentionRoute::kCpuFlash, "cpu flash"},
    {AttentionRoute::kVarlen, "varlen"},
    {AttentionRoute::kCascade, "cascade"}};
static_assert(util::NamesEvery(kAttentionRouteNames, AttentionRoute::kCascade));

// How many of its context's keys a segment sees: all of its own lie in
// the context when it is a prefix's chunk.
int64_t SharedKeys(const SegmentKeys& seg) {
  if (seg.context < 0) return 0;
  return seg.own.empty() ? seg.start + seg.length : seg.start;
}

// The keys its rows see: row i sees start + i + 1 of them.
int64_t VisibleCount(const SegmentKeys& seg) {
  const int64_t l = seg.length;
  return l * seg.start + l * (l + 1) / 2;
}

// Whether the segment joins `open`: same context and shared keys, and the
// item's rows x keys stays within the slack of what they see.
bool Joins(const AttentionItem& open, const SegmentKeys& seg, int64_t shared) {
  if (seg.context < 0 || seg.context != open.context || shared != open.shared) {
    return false;
  }
  const double rows = static_cast<double>(open.rows + seg.length);
  const double cols = static_cast<double>(open.keys.size()) +
                      static_cast<double>(seg.own.size());
  return rows * cols <=
         kGroupSlack * static_cast<double>(open.visible + VisibleCount(seg));
}

// The segment's rows and own keys, after what `item` holds.
void Append(AttentionItem& item, const SegmentKeys& seg, int64_t shared) {
  const int64_t l = seg.length;
  const int64_t own = static_cast<int64_t>(item.keys.size());
  item.keys.insert(item.keys.end(), seg.own.begin(), seg.own.end());
  for (int64_t i = 0; i < l; ++i) {
    const int64_t see = seg.start + i + 1;
    item.see.push_back(
        {std::min(see, shared), own, std::max<int64_t>(0, see - shared)});
  }
  item.rows += l;
  item.visible += VisibleCount(seg);
  ++item.segments;
}

// Whether `item` may join `bucket` (padded to the larger of both shapes).
bool Fits(const PlannedBucket& bucket, const AttentionItem& item,
          double slack) {
  const int64_t padded =
      (bucket.b() + 1) * std::max(bucket.tq, item.rows) *
      std::max(bucket.tk, static_cast<int64_t>(item.keys.size()));
  return padded <= slack * static_cast<double>(bucket.area + item.area()) &&
         padded <= kMaxBucketElements;
}

void SetRowOrder(PlannedBucket& bucket) {
  int64_t next = 0;
  bucket.rows_in_order = true;
  for (const AttentionItem& item : bucket.items) {
    bucket.rows_in_order &= item.row0 == next;
    next = item.row0 + item.rows;
  }
  if (bucket.b() == 1) bucket.first_row = bucket.items[0].row0;
}

VarlenLayout MakeVarlen(const PassKeys& keys) {
  VarlenLayout v;
  for (const SegmentKeys& s : keys.segments) {
    const int64_t n = s.start + s.length;
    v.cu_q.push_back(v.cu_q.back() + s.length);
    v.cu_k.push_back(v.cu_k.back() + n);
    for (int64_t j = 0; j < n; ++j) v.keys.push_back(keys.VisibleSlot(s, j));
    v.max_q = std::max(v.max_q, s.length);
    v.max_k = std::max(v.max_k, n);
  }
  return v;
}

void AddSequence(VarlenLayout& v, int64_t rows,
                 const std::vector<int64_t>& keys) {
  v.cu_q.push_back(v.cu_q.back() + rows);
  v.cu_k.push_back(v.cu_k.back() + static_cast<int64_t>(keys.size()));
  v.keys.insert(v.keys.end(), keys.begin(), keys.end());
  v.max_q = std::max(v.max_q, rows);
  v.max_k = std::max(v.max_k, static_cast<int64_t>(keys.size()));
}

CascadeLayout MakeCascade(const PassKeys& keys) {
  CascadeLayout c;
  // The shared call's sequences, one per (context, start) in the order
  // first seen, with their rows.
  std::vector<std::pair<std::pair<int32_t, int64_t>, std::vector<int64_t>>>
      shared;
  int64_t row = 0;
  for (const SegmentKeys& s : keys.segments) {
    const bool suffix = !s.own.empty() && s.context >= 0 && s.start > 0;
    std::vector<int64_t> own;
    if (!s.own.empty()) {
      own = s.own;
    } else {
      const std::vector<int64_t>& context =
          keys.contexts[static_cast<size_t>(s.context)];
      own.assign(context.begin(), context.begin() + s.start + s.length);
    }
    AddSequence(c.own, s.length, own);
    if (suffix) {
      const std::pair<int32_t, int64_t> key{s.context, s.start};
      auto it = std::find_if(shared.begin(), shared.end(),
                             [&](const auto& e) { return e.first == key; });
      if (it == shared.end()) {
        shared.push_back({key, {}});
        it = shared.end() - 1;
      }
      for (int64_t i = 0; i < s.length; ++i) it->second.push_back(row + i);
    }
    row += s.length;
  }
  for (const auto& [key, rows] : shared) {
    const std::vector<int64_t>& context =
        keys.contexts[static_cast<size_t>(key.first)];
    AddSequence(
        c.shared, static_cast<int64_t>(rows.size()),
        std::vector<int64_t>(context.begin(), context.begin() + key.second));
    c.shared_rows.insert(c.shared_rows.end(), rows.begin(), rows.end());
  }
  return c;
}

}  // namespace

const char* AttentionName(Attention attention) {
  return util::NameIn(kAttentionNames, attention, "eager");
}

absl::StatusOr<Attention> ParseAttention(const std::string& name) {
  if (auto attention = util::ValueIn(kAttentionNames, name)) return *attention;
  return absl::InvalidArgumentError(absl::StrCat(
      "model.attention: '", name, "' is not ", util::NamesIn(kAttentionNames)));
}

const char* AttentionRouteName(AttentionRoute route) {
  return util::NameIn(kAttentionRouteNames, route);
}

AttentionRoute ChooseRoute(Attention kind, bool on_cpu, bool varlen,
                           bool cascade) {
  if (varlen)
    return cascade ? AttentionRoute::kCascade : AttentionRoute::kVarlen;
  if (kind == Attention::kEager) return AttentionRoute::kEager;
  return on_cpu ? AttentionRoute::kCpuFlash : AttentionRoute::kSdpa;
}

std::vector<AttentionItem> MakeItems(const PassKeys& keys) {
  std::vector<AttentionItem> items;
  int64_t row = 0;
  for (const SegmentKeys& seg : keys.segments) {
    const int64_t shared = SharedKeys(seg);
    if (items.empty() || !Joins(items.back(), seg, shared)) {
      AttentionItem item;
      item.row0 = row;
      if (seg.context >= 0) {
        const std::vector<int64_t>& context =
            keys.contexts[static_cast<size_t>(seg.context)];
        item.keys.assign(context.begin(), context.begin() + shared);
      }
      item.context = seg.context;
      item.shared = shared;
      items.push_back(std::move(item));
    }
    Append(items.back(), seg, shared);
    row += seg.length;
  }
  return items;
}

std::vector<PlannedBucket> PackBuckets(std::vector<AttentionItem> items,
                                       bool causal) {
  std::stable_sort(items.begin(), items.end(),
                   [](const AttentionItem& a, const AttentionItem& b) {
                     if (a.rows != b.rows) return a.rows > b.rows;
                     return a.keys.size() > b.keys.size();
                   });
  const double slack = causal ? kCausalPadSlack : kMaskedPadSlack;
  std::vector<PlannedBucket> buckets;
  for (AttentionItem& item : items) {
    if (buckets.empty() || !Fits(buckets.back(), item, slack)) {
      buckets.emplace_back().causal = causal;
    }
    PlannedBucket& bucket = buckets.back();
    bucket.tq = std::max(bucket.tq, item.rows);
    bucket.tk = std::max(bucket.tk, static_cast<int64_t>(item.keys.size()));
    bucket.area += item.area();
    bucket.items.push_back(std::move(item));
  }
  for (PlannedBucket& bucket : buckets) SetRowOrder(bucket);
  return buckets;
}

AttentionBuckets PlanAttentionBuckets(AttentionRoute route,
                                      const PassKeys& keys) {
  AttentionBuckets plan;
  plan.route = route;
  if (route == AttentionRoute::kVarlen) {
    plan.varlen = MakeVarlen(keys);
    return plan;
  }
  if (route == AttentionRoute::kCascade) {
    plan.cascade = MakeCascade(keys);
    return plan;
  }
  // Under sdpa a segment with no context takes the causal kernel, no mask.
  const bool sdpa =
      route == AttentionRoute::kSdpa || route == AttentionRoute::kCpuFlash;
  std::vector<AttentionItem> masked, causal;
  for (AttentionItem& item : MakeItems(keys)) {
    const bool own_only = item.segments == 1 &&
                          item.rows == static_cast<int64_t>(item.keys.size());
    (sdpa && own_only ? causal : masked).push_back(std::move(item));
  }
  plan.buckets = PackBuckets(std::move(masked), false);
  for (PlannedBucket& b : PackBuckets(std::move(causal), true)) {
    plan.buckets.push_back(std::move(b));
  }
  plan.in_order = plan.buckets.size() == 1 && plan.buckets[0].rows_in_order;
  return plan;
}

BucketIndices GatherIndices(const PlannedBucket& bucket) {
  BucketIndices out;
  for (int64_t r = 0; r < bucket.b(); ++r) {
    const AttentionItem& item = bucket.items[static_cast<size_t>(r)];
    for (int64_t i = 0; i < bucket.tq; ++i) {
      out.q_index.push_back(item.row0 + std::min(i, item.rows - 1));
      if (i < item.rows) {
        out.keep.push_back(r * bucket.tq + i);
        out.out_rows.push_back(item.row0 + i);
      }
    }
    const int64_t k = static_cast<int64_t>(item.keys.size());
    for (int64_t j = 0; j < bucket.tk; ++j) {
      out.key_slots.push_back(
          item.keys[static_cast<size_t>(std::min(j, k - 1))]);
    }
  }
  return out;
}

void FillAllowed(const PlannedBucket& bucket, bool* allowed) {
  for (int64_t r = 0; r < bucket.b(); ++r) {
    const AttentionItem& item = bucket.items[static_cast<size_t>(r)];
    for (int64_t i = 0; i < bucket.tq; ++i) {
      bool* row = allowed + (r * bucket.tq + i) * bucket.tk;
      if (i >= item.rows) {
        row[0] = true;
        continue;
      }
      const VisibleKeys& v = item.see[static_cast<size_t>(i)];
      std::fill(row, row + v.shared, true);
      std::fill(row + v.own, row + v.own + v.owned, true);
    }
  }
}

}  // namespace mesa_anyjev::model
