// The KV pool's bookkeeping (blocks, references, the radix prefix cache, LRU
// eviction of unreferenced leaves) and the pass planner over it: every
// output planned exactly once, segments attend to exactly the slots of their
// positions, budgets and pool limits kept, nothing leaked.
#include "server/engine/pass_planner.h"

#include <catch2/catch.hpp>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "server/engine/kv_blocks.h"
#include "server/engine/pass_lease.h"

namespace mesa_anyjev::engine {
namespace {

std::vector<TokenId> Ids(int first, int n) {
  std::vector<TokenId> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

bool Live(int32_t) { return true; }

// One caller's groups as the old tests wrote them: a group, its caller, and
// the number of its first output among all of the test's.
struct PlanGroup {
  const PromptGroup* group = nullptr;
  int32_t owner = 0;
  int64_t first_output = 0;
};

// Segment s of a pass as one value: its geometry and the slots it sees
// (model::PassKeys), its tokens and its outputs (numbered as the test's).
struct SegmentView {
  int64_t start = 0, length = 0;
  int32_t context = -1;
  bool suffix = false;  // its tokens have blocks of their own
  std::vector<TokenId> tokens;
  std::vector<int64_t> keys;  // every slot it sees, its own tokens' last
  std::vector<int64_t> outputs;
};

struct Pass {
  PlannedPass planned;
  std::vector<SegmentView> segments;
  int64_t tokens = 0;
  const model::PassKeys& keys() const { return planned.plan.keys; }
  const std::vector<int64_t>& copy_from() const {
    return planned.plan.arrays.copy_from;
  }
  const std::vector<int64_t>& copy_to() const {
    return planned.plan.arrays.copy_to;
  }
};

// The planner as the engine drives it for one tenant: each caller's groups
// one work, the callers in order, a caller found gone dropped.
class Planner {
 public:
  Planner(KvBlocks* blocks, const std::vector<PlanGroup>& groups,
          int32_t layers, int64_t budget)
      : planner_(blocks, budget), layers_(layers) {
    for (const PlanGroup& g : groups) {
      if (callers_.empty() || callers_.back().owner != g.owner) {
        callers_.push_back({g.owner, g.first_output, {}});
      }
      callers_.back().groups.push_back(*g.group);
    }
    for (Caller& c : callers_) {
      works_.push_back(planner_.Prepare(c.groups, c.owner));
    }
  }

  absl::StatusOr<Pass> Next(const std::function<bool(int32_t)>& live,
                            int64_t budget = 0) {
    if (absl::Status begun = planner_.Begin(layers_, budget); !begun.ok()) {
      return begun;
    }
    for (PlanWork& work : works_) {
      if (work.done()) continue;
      if (!live(static_cast<int32_t>(work.owner()))) {
        planner_.Drop(work);
        continue;
      }
      bool room = true;
      while (room && !work.done()) {
        absl::StatusOr<bool> added = planner_.Add(work);
        if (!added.ok()) return added.status();
        room = *added;
      }
      if (!room) break;
    }
    return View(planner_.Take());
  }
  void Finish(bool ok) { planner_.Finish(ok); }
  const PlanStats& stats() const { return planner_.stats(); }

 private:
  struct Caller {
    int32_t owner;
    int64_t first_output;
    std::vector<PromptGroup> groups;
  };

  Pass View(PlannedPass planned) const {
    Pass pass;
    const model::PassKeys& keys = planned.plan.keys;
    const model::PassArrays& a = planned.plan.arrays;
    int64_t at = 0;
    for (const model::SegmentKeys& k : keys.segments) {
      SegmentView v{k.start, k.length, k.context, !k.own.empty(), {}, {}, {}};
      for (int64_t t = 0; t < k.length; ++t) {
        v.tokens.push_back(
            static_cast<TokenId>(a.tokens[static_cast<size_t>(at + t)]));
      }
      for (int64_t j = 0; j < k.start + k.length; ++j) {
        v.keys.push_back(keys.VisibleSlot(k, j));
      }
      at += k.length;
      for (size_t r = 0; r < a.rows.size(); ++r) {
        if (a.rows[r] != at - 1) continue;
        const RowOwner& row = planned.rows[r];
        for (const Caller& c : callers_) {
          if (c.owner == row.owner)
            v.outputs.push_back(c.first_output + row.output);
        }
      }
      pass.segments.push_back(std::move(v));
    }
    pass.tokens = planned.tokens;
    pass.planned = std::move(planned);
    return pass;
  }

  PassPlanner planner_;
  const int32_t layers_;
  std::vector<Caller> callers_;
  std::vector<PlanWork> works_;
};

const SegmentView& View(const Pass& pass, size_t s) { return pass.segments[s]; }

// Runs a planner to the end; checks each segment against the token
// sequences it stands for, and returns outputs -> times planned.
struct Outcome {
  std::map<int64_t, int> outputs;
  int passes = 0;
  int64_t max_tokens = 0;
};

Outcome Drain(Planner& planner, int64_t budget,
              const std::function<bool(int32_t)>& live = Live) {
  Outcome outcome;
  for (;;) {
    auto pass = planner.Next(live);
    REQUIRE(pass.ok());
    if (pass->segments.empty()) break;
    ++outcome.passes;
    int64_t tokens = 0;
    std::set<int64_t> written;
    REQUIRE(pass->keys().segments.size() == pass->segments.size());
    for (size_t s = 0; s < pass->segments.size(); ++s) {
      const SegmentView& seg = View(*pass, s);
      REQUIRE(static_cast<int64_t>(seg.keys.size()) == seg.start + seg.length);
      tokens += seg.length;
      for (int64_t t = seg.start; t < seg.start + seg.length; ++t) {
        // No two tokens of a pass write one slot.
        REQUIRE(written.insert(seg.keys[static_cast<size_t>(t)]).second);
      }
      for (int64_t out : seg.outputs) ++outcome.outputs[out];
    }
    REQUIRE(tokens == pass->tokens);
    outcome.max_tokens = std::max(outcome.max_tokens, tokens);
    if (pass->segments.size() > 1) REQUIRE(tokens <= budget);
    planner.Finish(true);
  }
  return outcome;
}

std::vector<BlockId> Ids(const std::vector<BlockRef>& refs) {
  std::vector<BlockId> ids;
  for (const BlockRef& ref : refs) ids.push_back(ref.id());
  return ids;
}

TEST_CASE("KvBlocks: allocation, references and freeing", "[engine]") {
  KvBlocks blocks(3, 4, true);
  auto a = blocks.Allocate(), b = blocks.Allocate(), c = blocks.Allocate();
  REQUIRE((a && b && c));
  CHECK(blocks.referenced() == 3);
  CHECK_FALSE(blocks.Allocate().has_value());
  const BlockId freed = b->id();
  b.reset();  // not cached: free again
  CHECK(blocks.referenced() == 2);
  CHECK(blocks.Allocate()->id() == freed);
  // A shared block stays held until its last reference goes.
  BlockRef shared = blocks.Share(a->id());
  a.reset();
  CHECK(blocks.referenced() == 2);
  BlockRef moved = std::move(shared);
  CHECK(shared.id() == moved.id());
  moved = BlockRef();
  CHECK(blocks.referenced() == 1);
}

TEST_CASE(
    "KvBlocks: the radix cache matches to the block and evicts LRU "
    "leaves only",
    "[engine]") {
  KvBlocks blocks(4, 2, true);
  const std::vector<TokenId> ids = Ids(10, 6);  // three blocks of 2
  std::vector<BlockRef> held;
  std::vector<BlockId> chain;
  for (int k = 0; k < 3; ++k) {
    held.push_back(*blocks.Allocate());
    chain.push_back(held.back().id());
    REQUIRE(blocks.Publish(k == 0 ? -1 : chain[k - 1], ids.data() + 2 * k,
                           chain[k], /*layers=*/5));
  }
  CHECK(Ids(blocks.Match(ids, 6, 5)) == chain);
  CHECK(blocks.Match(ids, 5, 5).size() == 2);  // within the limit
  CHECK(blocks.Match(ids, 6, 6).empty());      // shallower than asked
  std::vector<TokenId> other = ids;
  other[3] = 99;  // differs in block 1
  CHECK(blocks.Match(other, 6, 5).size() == 1);
  held.clear();
  CHECK(blocks.referenced() == 0);
  CHECK(blocks.cached() == 3);
  // The free block first, then the chain's leaf, then its parent.
  const auto x = blocks.Allocate(), y = blocks.Allocate();
  REQUIRE((x && y));
  CHECK(y->id() == chain[2]);
  CHECK(blocks.evictions() == 1);
  CHECK(blocks.Match(ids, 6, 5).size() == 2);
  const auto z = blocks.Allocate();
  CHECK(z->id() == chain[1]);
  CHECK(blocks.Match(ids, 6, 5).size() == 1);
}

TEST_CASE(
    "KvBlocks: a deeper block replaces a shallower one; unpublishing "
    "takes the subtree",
    "[engine]") {
  KvBlocks blocks(4, 2, true);
  const std::vector<TokenId> ids = Ids(0, 4);
  std::vector<BlockRef> held;
  for (int i = 0; i < 4; ++i) held.push_back(*blocks.Allocate());
  const BlockId a = held[0].id(), b = held[1].id();
  const BlockId deeper = held[2].id(), again = held[3].id();
  REQUIRE(blocks.Publish(-1, ids.data(), a, 2));
  REQUIRE(blocks.Publish(a, ids.data() + 2, b, 2));
  CHECK(blocks.Publish(-1, ids.data(), deeper, 4));
  CHECK(Ids(blocks.Match(ids, 4, 2)) == std::vector<BlockId>{deeper});
  // A shallower or equal block never replaces one that covers it.
  CHECK_FALSE(blocks.Publish(-1, ids.data(), again, 3));
  blocks.Unpublish(deeper);
  CHECK(blocks.Match(ids, 4, 1).empty());
  held.clear();
  CHECK(blocks.referenced() == 0);
  CHECK(blocks.cached() == 0);
}

TEST_CASE(
    "PassLease: commit keeps the pass's cache entries, abort (or a lease "
    "never settled) withdraws them; both release every reference",
    "[engine]") {
  const std::vector<TokenId> ids = Ids(0, 4);
  for (const int settle : {0, 1, 2}) {  // commit, abort, destroyed
    KvBlocks blocks(4, 2, true);
    {
      PassLease lease(&blocks);
      std::vector<BlockRef> chain;
      chain.push_back(*blocks.Allocate());
      chain.push_back(*blocks.Allocate());
      lease.Publish(-1, ids.data(), chain[0].id(), 3);
      lease.Publish(chain[0].id(), ids.data() + 2, chain[1].id(), 3);
      // Another prompt continuing 0 1 with 2 9 copies the run "2" of
      // chain[1] into a fresh block, held with the source by the lease.
      const std::vector<TokenId> other{2, 9};
      auto run = blocks.MatchPartial(chain[0].id(), other.data(), 2, 3,
                                     [](BlockId) { return true; });
      REQUIRE(run.has_value());
      CHECK(run->tokens == 1);
      std::optional<BlockRef> into = lease.CopyRun(std::move(*run));
      REQUIRE(into.has_value());
      CHECK(lease.CopiesInto(into->id()));
      CHECK_FALSE(lease.CopiesInto(chain[1].id()));
      CHECK(lease.copy_from() == std::vector<int64_t>{chain[1].id() * 2});
      CHECK(lease.copy_to() == std::vector<int64_t>{into->id() * 2});
      chain.push_back(std::move(*into));
      lease.Hold(chain);
      CHECK(chain.empty());
      CHECK(blocks.referenced() == 3);
      if (settle == 0) lease.Commit();
      if (settle == 1) lease.Abort();
      if (settle < 2) CHECK(blocks.referenced() == 0);
    }
    CHECK(blocks.referenced() == 0);
    CHECK(blocks.cached() == (settle == 0 ? 2 : 0));
  }
}

TEST_CASE("PassPlanner: the tokens every suffix begins with join the prefix",
          "[engine]") {
  KvBlocks blocks(64, 4, true);
  std::vector<TokenId> a = Ids(100, 3), b = Ids(100, 2), c = Ids(100, 6);
  b.push_back(7);
  c[2] = 9;  // all three begin 100 101, then differ
  PromptGroup group{Ids(0, 10), {a, b, c}, {}};
  Planner planner(&blocks, {{&group, 0, 0}}, 3, 1000);
  auto pass = planner.Next(Live);
  REQUIRE(pass.ok());
  REQUIRE(pass->segments.size() == 4);
  const SegmentView& prefix = View(*pass, 0);
  CHECK(prefix.length == 12);
  CHECK(prefix.tokens[10] == 100);
  CHECK(prefix.tokens[11] == 101);
  const std::vector<std::vector<TokenId>> rest{{102}, {7}, {9, 103, 104, 105}};
  for (size_t s = 1; s < 4; ++s) {
    const SegmentView& suffix = View(*pass, s);
    CHECK(suffix.start == 12);
    CHECK(suffix.context == prefix.context);
    CHECK(suffix.tokens == rest[s - 1]);
    CHECK(suffix.outputs == std::vector<int64_t>{static_cast<int64_t>(s - 1)});
  }
  CHECK(pass->tokens == 12 + 1 + 1 + 4);
  planner.Finish(true);
  REQUIRE(planner.Next(Live)->segments.empty());
}

TEST_CASE(
    "PassPlanner: suffixes keep a token each, and a prompt ending with "
    "the prefix keeps the group as it came",
    "[engine]") {
  for (const bool empty : {false, true}) {
    KvBlocks blocks(64, 4, true);
    PromptGroup group{Ids(0, 10), {Ids(100, 3), Ids(100, 5)}, {}};
    if (empty) group.suffixes.push_back({});
    Planner planner(&blocks, {{&group, 0, 0}}, 3, 1000);
    auto pass = planner.Next(Live);
    REQUIRE(pass.ok());
    CHECK(pass->keys().segments[0].length == (empty ? 10 : 12));
    CHECK(pass->tokens == (empty ? 10 + 3 + 5 : 12 + 1 + 3));
    planner.Finish(true);
  }
}

TEST_CASE("PassPlanner: a group's prefix and its suffixes in one pass",
          "[engine]") {
  KvBlocks blocks(64, 4, true);
  PromptGroup group{Ids(0, 10), {Ids(100, 3), Ids(200, 5), {}}, {}};
  Planner planner(&blocks, {{&group, 0, 0}}, 3, 1000);
  auto pass = planner.Next(Live);
  REQUIRE(pass.ok());
  REQUIRE(pass->segments.size() == 3);
  const SegmentView& prefix = View(*pass, 0);
  CHECK(prefix.start == 0);
  CHECK(prefix.length == 10);
  CHECK(prefix.outputs == std::vector<int64_t>{2});  // the empty suffix
  for (size_t s = 1; s < 3; ++s) {
    const SegmentView& suffix = View(*pass, s);
    CHECK(suffix.start == 10);
    CHECK(suffix.suffix);
    // The prefix's slots (one context for all), then its own.
    CHECK(std::equal(prefix.keys.begin(), prefix.keys.end(),
                     suffix.keys.begin()));
    CHECK(suffix.context == prefix.context);
  }
  // All its keys are the context's: one context in the pass.
  CHECK_FALSE(prefix.suffix);
  CHECK(pass->keys().contexts.size() == 1);
  CHECK(pass->keys().contexts[0].size() == 10);
  CHECK(pass->tokens == 18);
  planner.Finish(true);
  REQUIRE(planner.Next(Live)->segments.empty());
}

TEST_CASE(
    "PassPlanner: a cached prefix is reused to the block, across "
    "planners and within a pass",
    "[engine]") {
  KvBlocks blocks(64, 4, true);
  const std::vector<TokenId> state = Ids(0, 18);
  auto question = [&](int q) {
    std::vector<TokenId> p = state;
    for (TokenId t : Ids(1000 * (q + 1), 3)) p.push_back(t);
    return p;
  };
  PromptGroup g0{question(0), {Ids(50, 2), Ids(60, 2)}, {}};
  PromptGroup g1{question(1), {Ids(70, 2)}, {}};
  {
    Planner planner(&blocks, {{&g0, 0, 0}, {&g1, 0, 2}}, 3, 1000);
    const Outcome o = Drain(planner, 1000);
    CHECK(o.passes == 1);
    CHECK(o.outputs.size() == 3);
    // The second question found the state's four full blocks, published by
    // the first question's segment in the same pass, and the state's last
    // two tokens at the start of the first question's fifth block.
    CHECK(planner.stats().prefix_hits == 1);
    CHECK(planner.stats().reused_tokens == 16 + 2);
    CHECK(planner.stats().computed_tokens == 21 + 4 + 3 + 2);
  }
  CHECK(blocks.referenced() == 0);
  PromptGroup g2{question(2), {Ids(80, 2)}, {}};
  Planner planner(&blocks, {{&g2, 0, 0}}, 3, 1000);
  Drain(planner, 1000);
  CHECK(planner.stats().reused_tokens == 16 + 2);
  // A deeper pass cannot use blocks computed to 3 blocks.
  Planner deeper(&blocks, {{&g2, 0, 0}}, 4, 1000);
  Drain(deeper, 1000);
  CHECK(deeper.stats().prefix_misses == 1);
}

TEST_CASE("PassPlanner: a pass's own budget, never past the planner's",
          "[engine]") {
  KvBlocks blocks(64, 4, true);
  PromptGroup a{Ids(0, 30), {Ids(100, 3)}, {}};
  Planner planner(&blocks, {{&a, 0, 0}}, 2, 8);
  const std::vector<int64_t> budgets = {4, 100, 0};
  const std::vector<int64_t> want = {4, 8, 8};
  for (size_t i = 0; i < budgets.size(); ++i) {
    auto pass = planner.Next(Live, budgets[i]);
    REQUIRE(pass.ok());
    CHECK(pass->tokens == want[i]);
    planner.Finish(true);
  }
}

TEST_CASE("PassPlanner: budgets chunk long prefixes on block boundaries",
          "[engine]") {
  KvBlocks blocks(64, 4, true);
  PromptGroup a{Ids(0, 30), {Ids(100, 3), Ids(110, 6), Ids(120, 2)}, {}};
  PromptGroup b{{}, {Ids(500, 9), Ids(600, 1)}, {}};
  for (int64_t budget : {1, 3, 8, 13, 1000}) {
    Planner planner(&blocks, {{&a, 0, 0}, {&b, 1, 3}}, 2, budget);
    const Outcome o = Drain(planner, budget);
    REQUIRE(o.outputs.size() == 5);
    for (const auto& [out, times] : o.outputs) CHECK(times == 1);
    if (budget == 1000) CHECK(o.passes == 1);
  }
  CHECK(blocks.referenced() == 0);
}

TEST_CASE(
    "PassPlanner: a pool that holds one group at a time finishes "
    "every group",
    "[engine]") {
  // 12 tokens of prefix + 4 of suffix: 4 blocks of 4, and the pool has 5.
  KvBlocks blocks(5, 4, true);
  std::vector<PromptGroup> groups;
  for (int g = 0; g < 6; ++g) {
    groups.push_back({Ids(100 * g, 12), {Ids(5000, 4), Ids(6000, 3)}, {}});
  }
  std::vector<PlanGroup> plan;
  for (size_t g = 0; g < groups.size(); ++g) {
    plan.push_back({&groups[g], 0, static_cast<int64_t>(2 * g)});
  }
  REQUIRE(PassPlanner::Check(groups, blocks).ok());
  {
    Planner planner(&blocks, plan, 2, 1000);
    const Outcome o = Drain(planner, 1000);
    CHECK(o.outputs.size() == 12);
    CHECK(o.passes > 1);
    CHECK(blocks.evictions() > 0);
  }
  CHECK(blocks.referenced() == 0);
  KvBlocks tiny(3, 4, true);
  std::optional<PoolShortfall> shortfall;
  const absl::Status status = PassPlanner::Check(groups, tiny, &shortfall);
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  // The sizes, and no configuration key: the backend names the setting.
  CHECK(status.message() ==
        "a prompt group of 16 tokens needs 4 KV blocks of 4 tokens; the pool "
        "holds 3");
  REQUIRE(shortfall.has_value());
  CHECK(shortfall->Describe("the pool (engine.kv_pool_bytes)") ==
        "a prompt group of 16 tokens needs 4 KV blocks of 4 tokens; the pool "
        "(engine.kv_pool_bytes) holds 3");
}

TEST_CASE(
    "PassPlanner: a dropped caller's groups stop and release their "
    "blocks; a failed pass withdraws its cache entries",
    "[engine]") {
  KvBlocks blocks(64, 4, true);
  PromptGroup a{Ids(0, 20), {Ids(100, 3), Ids(200, 3)}, {}};
  PromptGroup b{Ids(1000, 20), {Ids(300, 3)}, {}};
  {
    Planner planner(&blocks, {{&a, 0, 0}, {&b, 1, 2}}, 2, 22);
    auto first = planner.Next(Live);
    REQUIRE(first.ok());
    planner.Finish(true);
    const Outcome rest = Drain(planner, 22, [](int32_t owner) {
      return owner != 0;  // the first caller went away
    });
    CHECK(rest.outputs.count(0) + rest.outputs.count(1) == 0);
    CHECK(rest.outputs.count(2) == 1);
  }
  CHECK(blocks.referenced() == 0);
  KvBlocks fresh(64, 4, true);
  {
    Planner planner(&fresh, {{&a, 0, 0}}, 2, 1000);
    REQUIRE(planner.Next(Live).ok());
    planner.Finish(false);
  }
  CHECK(fresh.cached() == 0);
  CHECK(fresh.referenced() == 0);
}

TEST_CASE(
    "PassPlanner: Begin refuses while a pass is in flight; a planner "
    "dropped mid-pass withdraws that pass and releases every block",
    "[engine]") {
  KvBlocks blocks(64, 4, true);
  PromptGroup a{Ids(0, 20), {Ids(100, 3), Ids(200, 3)}, {}};
  PromptGroup b{Ids(1000, 20), {Ids(300, 3)}, {}};
  {
    Planner planner(&blocks, {{&a, 0, 0}, {&b, 0, 2}}, 2, 26);
    auto first = planner.Next(Live);
    REQUIRE(first.ok());
    REQUIRE_FALSE(first->segments.empty());
    const auto again = planner.Next(Live);
    CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
    planner.Finish(true);
    CHECK(blocks.cached() == 5);  // the first prefix's full blocks
    auto second = planner.Next(Live);
    REQUIRE(second.ok());
    REQUIRE_FALSE(second->segments.empty());
    CHECK(blocks.referenced() > 0);
  }
  CHECK(blocks.referenced() == 0);
  // The first pass's entries stay; the abandoned second pass's are gone.
  CHECK(blocks.cached() == 5);
  // A group with nothing left to compute (its prefix cached, no suffix)
  // closes in a pass that stays empty: what it held is released.
  PromptGroup cached{Ids(0, 20), {}, {}};
  {
    Planner planner(&blocks, {{&cached, 0, 0}}, 2, 26);
    auto pass = planner.Next(Live);
    REQUIRE(pass.ok());
    CHECK(pass->segments.empty());
    CHECK(planner.stats().prefix_hits == 1);
  }
  CHECK(blocks.referenced() == 0);
}

TEST_CASE(
    "PassPlanner: a prompt that ends with a cached prefix still runs "
    "its last token",
    "[engine]") {
  KvBlocks blocks(64, 4, true);
  PromptGroup whole{{}, {Ids(0, 8)}, {}};
  for (int round = 0; round < 2; ++round) {
    Planner planner(&blocks, {{&whole, 0, 0}}, 2, 1000);
    auto pass = planner.Next(Live);
    REQUIRE(pass.ok());
    REQUIRE(pass->segments.size() == 1);
    CHECK(pass->segments[0].outputs == std::vector<int64_t>{0});
    // The second time, three of the last block's tokens are copied from
    // the cached one: only the last token runs.
    CHECK(pass->keys().segments[0].start == (round == 0 ? 0 : 7));
    CHECK(pass->copy_from().size() == (round == 0 ? 0u : 3u));
    planner.Finish(true);
  }
  PromptGroup empty{{}, {{}}, {}};
  CHECK(PassPlanner::Check({empty}, blocks).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE(
    "PassPlanner: a prefix that continues part of a cached block copies "
    "that run, never from a copy of the same pass",
    "[engine]") {
  KvBlocks blocks(64, 4, true);
  auto prompt = [](std::vector<TokenId> tail) {
    std::vector<TokenId> p = Ids(0, 6);  // a full block, then 4 5
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  PromptGroup a{prompt({101, 102, 103}), {Ids(50, 1)}, {}};
  PromptGroup b{prompt({100, 200, 201}), {Ids(60, 1)}, {}};
  PromptGroup c{prompt({100, 201, 202}), {Ids(70, 1)}, {}};
  Planner first(&blocks, {{&a, 0, 0}}, 2, 1000);
  REQUIRE(Drain(first, 1000).outputs.size() == 1);
  // a's second block [4 5 101 102] is cached. b shares 4 5 with it. c
  // shares 4 5 100 with b's second block, but that block's first positions
  // are themselves a copy of this pass: c copies 4 5 from a's too.
  Planner second(&blocks, {{&b, 0, 0}, {&c, 0, 1}}, 2, 1000);
  auto pass = second.Next(Live);
  REQUIRE(pass.ok());
  const int64_t bs = blocks.block_tokens();
  std::vector<int64_t> to;
  std::set<int64_t> from_blocks;
  REQUIRE(pass->copy_from().size() == pass->copy_to().size());
  for (size_t i = 0; i < pass->copy_from().size(); ++i) {
    const int64_t f = pass->copy_from()[i], t = pass->copy_to()[i];
    from_blocks.insert(f / bs);
    CHECK(f % bs == t % bs);  // same positions
    to.push_back(t);
  }
  CHECK(from_blocks.size() == 1);  // a's block
  REQUIRE(to.size() == 4);
  // Each copy lands in the block its prompt's first segment attends to.
  int prefixes = 0;
  for (size_t s = 0; s < pass->segments.size(); ++s) {
    const SegmentView& seg = View(*pass, s);
    if (seg.suffix) continue;
    ++prefixes;
    CHECK(seg.start == 6);
    CHECK(std::find(to.begin(), to.end(), seg.keys[4]) != to.end());
    CHECK(from_blocks.count(seg.keys[4] / bs) == 0);
  }
  CHECK(prefixes == 2);
  CHECK(second.stats().reused_tokens == 2 * (4 + 2));
  second.Finish(true);
  REQUIRE(second.Next(Live)->segments.empty());
  CHECK(blocks.referenced() == 0);

  // A copy runs in the pass its prompt started in, even when the prompt's
  // first segment waits for the next pass; a caller dropped then releases
  // everything: d matched 4 5 of a's block, but the pass had one token
  // left for it.
  PromptGroup x{{}, {Ids(0, 3)}, {}};
  PromptGroup d{prompt({150, 151, 152}), {Ids(80, 1)}, {}};
  Planner tiny(&blocks, {{&x, 0, 0}, {&d, 1, 1}}, 2, 4);
  auto one = tiny.Next(Live);
  REQUIRE(one.ok());
  CHECK(one->segments.size() == 1);
  CHECK(one->copy_from().size() == 2);
  CHECK(tiny.stats().reused_tokens == 4 + 2);  // d started
  tiny.Finish(true);
  auto dropped = tiny.Next([](int32_t owner) { return owner != 1; });
  REQUIRE(dropped.ok());
  CHECK(dropped->segments.empty());
  CHECK(blocks.referenced() == 0);
}

TEST_CASE(
    "PassPlanner: a partial match whose copy would need its own source's "
    "block computes instead",
    "[engine]") {
  // Two blocks of 4: a's two blocks fill the pool. b matches the first and
  // three tokens of the second, but the only block it could take for the
  // copy is that second block (unreferenced, so evictable): it is held,
  // nothing is left to allocate, and b runs its 4 tokens.
  KvBlocks blocks(2, 4, true);
  std::vector<TokenId> a_ids = Ids(0, 8), b_ids = Ids(0, 7);
  b_ids.push_back(150);
  PromptGroup a{{}, {a_ids}, {}};
  PromptGroup b{{}, {b_ids}, {}};
  Planner first(&blocks, {{&a, 0, 0}}, 2, 1000);
  REQUIRE(Drain(first, 1000).outputs.size() == 1);
  Planner second(&blocks, {{&b, 0, 0}}, 2, 1000);
  auto pass = second.Next(Live);
  REQUIRE(pass.ok());
  REQUIRE(pass->segments.size() == 1);
  CHECK(pass->copy_from().empty());
  CHECK(pass->keys().segments[0].start == 4);
  second.Finish(true);
  REQUIRE(second.Next(Live)->segments.empty());
  CHECK(blocks.referenced() == 0);
}

}  // namespace
}  // namespace mesa_anyjev::engine
