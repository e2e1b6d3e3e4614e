// The attention plan without libtorch: the route each flag combination
// takes, which segments share an item (a group's prefix and suffixes, split
// past the slack), how items are padded into buckets, which rows each bucket
// answers, and what each padded query may see.
#include "server/model/attention_buckets.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace mesa_anyjev::model {
namespace {

std::vector<int64_t> Slots(int64_t first, int64_t n) {
  std::vector<int64_t> slots(static_cast<size_t>(n));
  std::iota(slots.begin(), slots.end(), first);
  return slots;
}

std::vector<int64_t> Concat(std::vector<int64_t> a,
                            const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A pass built segment by segment from the whole list of slots each sees
// (its own tokens' last), in PassKeys' form: segments of one group share
// its context, the first `shared_length` of those slots; a segment whose
// slots are all shared is its prefix's chunk, inside the context.
struct Pass {
  PassKeys keys;
  std::map<int64_t, int32_t> context_of;  // group -> context

  Pass& Add(int64_t length, std::vector<int64_t> slots, int64_t group = -1,
            int64_t shared_length = 0) {
    const int64_t n = static_cast<int64_t>(slots.size());
    SegmentKeys seg;
    seg.length = length;
    seg.start = n - length;
    const int64_t shared = group < 0 ? n - length : std::min(shared_length, n);
    REQUIRE((shared == n || shared == n - length));
    if (shared > 0 || group >= 0) {
      auto [it, added] = context_of.emplace(
          group < 0 ? -1 - static_cast<int64_t>(keys.segments.size()) : group,
          static_cast<int32_t>(keys.contexts.size()));
      if (added) keys.contexts.emplace_back();
      std::vector<int64_t>& context =
          keys.contexts[static_cast<size_t>(it->second)];
      if (static_cast<int64_t>(context.size()) < shared) {
        context.assign(slots.begin(), slots.begin() + shared);
      }
      REQUIRE(
          std::equal(slots.begin(), slots.begin() + shared, context.begin()));
      seg.context = it->second;
    }
    if (shared < n) seg.own.assign(slots.begin() + shared, slots.end());
    keys.segments.push_back(std::move(seg));
    return *this;
  }
};

// An item of `rows` queries over `keys` slots, as PackBuckets sees it.
AttentionItem Item(int64_t row0, int64_t rows, int64_t keys) {
  AttentionItem item;
  item.row0 = row0;
  item.rows = rows;
  item.keys = Slots(1000 * row0, keys);
  return item;
}

// Which (row, key) pairs of a bucket may attend, [B * Tq][Tk].
std::vector<std::vector<bool>> Allowed(const PlannedBucket& bucket) {
  const size_t n = static_cast<size_t>(bucket.b() * bucket.tq * bucket.tk);
  std::unique_ptr<bool[]> allowed(new bool[n]());
  FillAllowed(bucket, allowed.get());
  std::vector<std::vector<bool>> rows;
  for (int64_t r = 0; r < bucket.b() * bucket.tq; ++r) {
    const bool* row = allowed.get() + r * bucket.tk;
    rows.emplace_back(row, row + bucket.tk);
  }
  return rows;
}

std::vector<bool> Seen(int64_t tk, const std::vector<int64_t>& keys) {
  std::vector<bool> seen(static_cast<size_t>(tk), false);
  for (int64_t k : keys) seen[static_cast<size_t>(k)] = true;
  return seen;
}

TEST_CASE("attention takes one route for each flag combination",
          "[attention]") {
  using R = AttentionRoute;
  CHECK(ChooseRoute(Attention::kEager, true, false) == R::kEager);
  CHECK(ChooseRoute(Attention::kEager, false, false) == R::kEager);
  CHECK(ChooseRoute(Attention::kSdpa, true, false) == R::kCpuFlash);
  CHECK(ChooseRoute(Attention::kSdpa, false, false) == R::kSdpa);
  // The probe's verdict wins (the loader asks it only for sdpa on CUDA).
  for (Attention kind : {Attention::kEager, Attention::kSdpa}) {
    for (bool on_cpu : {true, false}) {
      CHECK(ChooseRoute(kind, on_cpu, true) == R::kVarlen);
    }
  }
  CHECK(std::string(AttentionName(Attention::kEager)) == "eager");
  CHECK(std::string(AttentionName(Attention::kSdpa)) == "sdpa");
}

TEST_CASE("segments with no context take sdpa's causal kernel, no mask",
          "[attention]") {
  Pass pass;
  pass.Add(4, Slots(0, 4))                        // a fresh prompt
      .Add(2, Slots(10, 6))                       // 4 keys of context
      .Add(3, Slots(20, 3), /*shared_id=*/5, 3);  // a fresh prefix, alone
  for (AttentionRoute route :
       {AttentionRoute::kSdpa, AttentionRoute::kCpuFlash}) {
    const AttentionBuckets plan = PlanAttentionBuckets(route, pass.keys);
    CHECK(plan.route == route);
    REQUIRE(plan.buckets.size() == 2);
    // The masked bucket first, then the causal one.
    const PlannedBucket& masked = plan.buckets[0];
    const PlannedBucket& causal = plan.buckets[1];
    CHECK_FALSE(masked.causal);
    REQUIRE(masked.b() == 1);
    CHECK(masked.items[0].row0 == 4);
    CHECK(causal.causal);
    REQUIRE(causal.b() == 2);
    CHECK(causal.items[0].row0 == 0);  // longest first
    CHECK(causal.items[1].row0 == 6);
    CHECK_FALSE(plan.in_order);
  }
  // Eager masks every bucket.
  const AttentionBuckets eager =
      PlanAttentionBuckets(AttentionRoute::kEager, pass.keys);
  for (const PlannedBucket& bucket : eager.buckets) CHECK_FALSE(bucket.causal);
}

TEST_CASE("a group's prefix part and its suffixes share one item",
          "[attention]") {
  // The prefix: 96 keys cached, its last 4 tokens in this pass; two
  // suffixes of 3 and 2 tokens after its 100 keys.
  const std::vector<int64_t> prefix = Slots(0, 100);
  Pass pass;
  pass.Add(4, prefix, /*shared_id=*/7, 100)
      .Add(3, Concat(prefix, Slots(200, 3)), 7, 100)
      .Add(2, Concat(prefix, Slots(300, 2)), 7, 100);
  const std::vector<AttentionItem> items = MakeItems(pass.keys);
  REQUIRE(items.size() == 1);
  const AttentionItem& item = items[0];
  CHECK(item.row0 == 0);
  CHECK(item.rows == 9);
  CHECK(item.segments == 3);
  // The prefix's keys once, then each suffix's own.
  CHECK(item.keys == Concat(Concat(prefix, Slots(200, 3)), Slots(300, 2)));
  REQUIRE(item.see.size() == 9);
  // The prefix's rows: causal over its keys, aligned to their end.
  CHECK(item.see[0].shared == 97);
  CHECK(item.see[3].shared == 100);
  CHECK(item.see[3].owned == 0);
  // The suffixes' rows: the prefix, then their own keys causally.
  CHECK(item.see[4].shared == 100);
  CHECK(item.see[4].own == 100);
  CHECK(item.see[4].owned == 1);
  CHECK(item.see[8].own == 103);
  CHECK(item.see[8].owned == 2);
  CHECK(item.visible == (4 * 96 + 10) + (3 * 100 + 6) + (2 * 100 + 3));

  // Under sdpa too a group's item is masked: one mask for all its rows.
  const AttentionBuckets plan =
      PlanAttentionBuckets(AttentionRoute::kSdpa, pass.keys);
  REQUIRE(plan.buckets.size() == 1);
  const PlannedBucket& bucket = plan.buckets[0];
  CHECK_FALSE(bucket.causal);
  CHECK(plan.in_order);
  CHECK(bucket.first_row == 0);
  const auto allowed = Allowed(bucket);
  std::vector<int64_t> second_suffix_row0 = Slots(0, 100);
  second_suffix_row0.push_back(103);  // not the first suffix's 100..102
  CHECK(allowed[7] == Seen(105, second_suffix_row0));
  CHECK(allowed[0] == Seen(105, Slots(0, 97)));
}

TEST_CASE("another context, or none shared, starts a new item", "[attention]") {
  const std::vector<int64_t> prefix = Slots(0, 100);
  Pass pass;
  pass.Add(1, Concat(prefix, {200}), /*group=*/1, 100)
      .Add(1, Concat(prefix, {201}), /*group=*/2, 100)  // another context
      .Add(1, Concat(Slots(500, 100), {202}), 3, 100)   // other keys
      .Add(1, Concat(Slots(500, 100), {203}))           // no group
      .Add(1, Concat(Slots(500, 100), {204}));
  const std::vector<AttentionItem> items = MakeItems(pass.keys);
  REQUIRE(items.size() == 5);
  for (size_t i = 0; i < items.size(); ++i) {
    CHECK(items[i].row0 == static_cast<int64_t>(i));
    CHECK(items[i].segments == 1);
    CHECK(items[i].keys.size() == 101);
  }
  // Alone, a segment sees its own context, then its own token.
  CHECK(items[3].see[0].shared == 100);
  CHECK(items[3].see[0].owned == 1);
}

TEST_CASE("a group splits where one item would pass the slack", "[attention]") {
  // One-token suffixes over 8 cached keys: two rows x 10 keys cost 20
  // against 18 seen (within 1.2x), three rows x 11 keys 33 against 27 (not).
  const std::vector<int64_t> prefix = Slots(0, 8);
  Pass pass;
  for (int64_t s = 0; s < 3; ++s) pass.Add(1, Concat(prefix, {100 + s}), 3, 8);
  std::vector<AttentionItem> items = MakeItems(pass.keys);
  REQUIRE(items.size() == 2);
  CHECK(items[0].rows == 2);
  CHECK(items[0].keys == Concat(prefix, {100, 101}));
  // The new part reads the prefix again.
  CHECK(items[1].row0 == 2);
  CHECK(items[1].keys == Concat(prefix, {102}));

  // Over 100 shared keys the same suffixes all fit.
  const std::vector<int64_t> long_prefix = Slots(0, 100);
  Pass long_pass;
  for (int64_t s = 0; s < 4; ++s) {
    long_pass.Add(1, Concat(long_prefix, {200 + s}), 3, 100);
  }
  items = MakeItems(long_pass.keys);
  REQUIRE(items.size() == 1);
  CHECK(items[0].rows == 4);
  CHECK(items[0].keys.size() == 104);
}

TEST_CASE("buckets pad items to their largest shape within the slack",
          "[attention]") {
  // 2 x 10 x 20 padded against 200 + 180 real: within 1.1x.
  std::vector<PlannedBucket> buckets =
      PackBuckets({Item(0, 9, 20), Item(9, 10, 20)}, false);
  REQUIRE(buckets.size() == 1);
  CHECK(buckets[0].b() == 2);
  CHECK(buckets[0].tq == 10);
  CHECK(buckets[0].tk == 20);
  CHECK(buckets[0].area == 380);
  CHECK(buckets[0].items[0].rows == 10);  // longest queries first

  // 2 x 4 x 4 against 16 + 9: within 1.5x (causal), not 1.1x (masked).
  buckets = PackBuckets({Item(0, 4, 4), Item(4, 3, 3)}, true);
  REQUIRE(buckets.size() == 1);
  CHECK(buckets[0].causal);
  CHECK(buckets[0].tq == 4);
  CHECK(buckets[0].tk == 4);
  buckets = PackBuckets({Item(0, 4, 4), Item(4, 3, 3)}, false);
  REQUIRE(buckets.size() == 2);
  CHECK_FALSE(buckets[0].causal);
  CHECK(buckets[1].tq == 3);
  CHECK(buckets[1].tk == 3);

  // At most kMaxBucketElements per head: two 1024 x 1024 items, not three.
  buckets = PackBuckets(
      {Item(0, 1024, 1024), Item(1024, 1024, 1024), Item(2048, 1024, 1024)},
      false);
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].b() * buckets[0].tq * buckets[0].tk == kMaxBucketElements);
  CHECK(buckets[1].b() == 1);
}

TEST_CASE("a bucket's rows: in place, in order, or gathered and scattered",
          "[attention]") {
  // One item reads its rows in place.
  std::vector<PlannedBucket> buckets = PackBuckets({Item(3, 5, 8)}, false);
  REQUIRE(buckets.size() == 1);
  CHECK(buckets[0].first_row == 3);
  CHECK_FALSE(buckets[0].rows_in_order);

  // Rows 0..20 in order: no scatter, but gathered (two items).
  buckets = PackBuckets({Item(0, 11, 20), Item(11, 10, 19)}, false);
  REQUIRE(buckets.size() == 1);
  CHECK(buckets[0].rows_in_order);
  CHECK(buckets[0].first_row == -1);

  // Sorting puts the longer item (rows 10..20) first.
  buckets = PackBuckets({Item(0, 10, 19), Item(10, 11, 20)}, false);
  REQUIRE(buckets.size() == 1);
  const PlannedBucket& bucket = buckets[0];
  CHECK_FALSE(bucket.rows_in_order);
  const BucketIndices indices = GatherIndices(bucket);
  CHECK(indices.out_rows == Concat(Slots(10, 11), Slots(0, 10)));
  CHECK(indices.keep == Concat(Slots(0, 11), Slots(11, 10)));
  // The shorter item's pad query repeats its last row, its pad key its last
  // key.
  REQUIRE(indices.q_index.size() == 22);
  CHECK(indices.q_index[21] == 9);
  REQUIRE(indices.key_slots.size() == 40);
  CHECK(indices.key_slots[39] == 18);
  CHECK(indices.key_slots[38] == 18);
}

TEST_CASE("the plan is in order only as one bucket of rows in order",
          "[attention]") {
  Pass one;
  one.Add(3, Slots(0, 7));
  AttentionBuckets plan =
      PlanAttentionBuckets(AttentionRoute::kEager, one.keys);
  REQUIRE(plan.buckets.size() == 1);
  CHECK(plan.in_order);
  CHECK(plan.buckets[0].first_row == 0);

  Pass two;  // far apart in size: two buckets
  two.Add(1, Slots(0, 7)).Add(8, Slots(10, 16));
  plan = PlanAttentionBuckets(AttentionRoute::kEager, two.keys);
  REQUIRE(plan.buckets.size() == 2);
  CHECK_FALSE(plan.in_order);
  CHECK(plan.buckets[0].first_row == 1);
  CHECK(plan.buckets[1].first_row == 0);
}

TEST_CASE("a pad query sees key 0 only", "[attention]") {
  Pass pass;
  pass.Add(10, Slots(0, 19)).Add(11, Slots(100, 20));
  const AttentionBuckets plan =
      PlanAttentionBuckets(AttentionRoute::kEager, pass.keys);
  REQUIRE(plan.buckets.size() == 1);
  const PlannedBucket& bucket = plan.buckets[0];
  REQUIRE(bucket.tq == 11);
  REQUIRE(bucket.tk == 20);
  const auto allowed = Allowed(bucket);
  // The second item's (rows 0..9, 19 keys) last real row and its pad.
  CHECK(allowed[20] == Seen(20, Slots(0, 19)));
  CHECK(allowed[21] == Seen(20, {0}));
}

TEST_CASE("varlen lays the segments back to back, without buckets",
          "[attention]") {
  Pass pass;
  pass.Add(5, Slots(0, 12)).Add(3, Slots(12, 3));
  const AttentionBuckets plan =
      PlanAttentionBuckets(AttentionRoute::kVarlen, pass.keys);
  CHECK(plan.buckets.empty());
  CHECK(plan.varlen.cu_q == std::vector<int64_t>{0, 5, 8});
  CHECK(plan.varlen.cu_k == std::vector<int64_t>{0, 12, 15});
  CHECK(plan.varlen.keys == Slots(0, 15));
  CHECK(plan.varlen.max_q == 5);
  CHECK(plan.varlen.max_k == 12);
}

}  // namespace
}  // namespace mesa_anyjev::model
