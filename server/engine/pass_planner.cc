#include "server/engine/pass_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::engine {
namespace {

int64_t BlocksFor(int64_t tokens, int64_t bs) { return (tokens + bs - 1) / bs; }

absl::Status PoolTooSmall(int64_t tokens, int64_t need,
                          const KvBlocks& blocks) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "a prompt group of ", tokens, " tokens needs ", need, " KV blocks of ",
      blocks.block_tokens(), " tokens; the pool (engine.kv_pool_bytes) holds ",
      blocks.num_blocks()));
}

}  // namespace

absl::Status PassPlanner::Check(const std::vector<PlanGroup>& groups,
                                const KvBlocks& blocks) {
  const int64_t bs = blocks.block_tokens();
  for (const PlanGroup& g : groups) {
    const PromptGroup& group = *g.group;
    const int64_t p = static_cast<int64_t>(group.prefix.size());
    int64_t longest = 0;
    for (const auto& suffix : group.suffixes) {
      const int64_t s = static_cast<int64_t>(suffix.size());
      if (p + s == 0) {
        return absl::InvalidArgumentError("a prompt has no tokens");
      }
      if (p == 0 && BlocksFor(s, bs) > blocks.num_blocks()) {
        return PoolTooSmall(s, BlocksFor(s, bs), blocks);
      }
      longest = std::max(longest, s);
    }
    const int64_t need = BlocksFor(p, bs) + BlocksFor(longest, bs);
    if (p > 0 && need > blocks.num_blocks()) {
      return PoolTooSmall(p + longest, need, blocks);
    }
  }
  return absl::OkStatus();
}

PassPlanner::PassPlanner(KvBlocks* blocks, const std::vector<PlanGroup>& groups,
                         int32_t depth, int64_t budget)
    : blocks_(blocks), depth_(depth), budget_(std::max<int64_t>(budget, 1)) {
  for (const PlanGroup& g : groups) {
    const PromptGroup& group = *g.group;
    if (group.prefix.empty()) {
      // Whole prompts: each is a cacheable prefix of its own.
      for (size_t i = 0; i < group.suffixes.size(); ++i) {
        Unit unit;
        unit.prefix = &group.suffixes[i];
        unit.prefix_outputs = {g.first_output + static_cast<int64_t>(i)};
        unit.owner = g.owner;
        units_.push_back(std::move(unit));
      }
      continue;
    }
    Unit unit;
    unit.prefix = &group.prefix;
    unit.owner = g.owner;
    for (size_t i = 0; i < group.suffixes.size(); ++i) {
      const int64_t out = g.first_output + static_cast<int64_t>(i);
      const std::vector<TokenId>& suffix = group.suffixes[i];
      if (suffix.empty()) {
        unit.prefix_outputs.push_back(out);
      } else {
        unit.suffixes.push_back(
            {suffix.data(), static_cast<int64_t>(suffix.size()), out});
      }
    }
    ExtendPrefix(unit, blocks_->block_tokens());
    units_.push_back(std::move(unit));
  }
  // Prompts that share a beginning run next to each other (a state's
  // questions after the state), so its blocks are still cached.
  std::stable_sort(
      units_.begin(), units_.end(), [](const Unit& a, const Unit& b) {
        return std::lexicographical_compare(a.prefix->begin(), a.prefix->end(),
                                            b.prefix->begin(), b.prefix->end());
      });
}

void PassPlanner::ExtendPrefix(Unit& unit, int64_t bs) {
  // A prompt that ends with the prefix owes its output at the prefix's end.
  if (unit.suffixes.size() < 2 || !unit.prefix_outputs.empty()) return;
  // The tokens every suffix begins with; each suffix keeps one at least.
  int64_t common = unit.suffixes[0].length - 1, longest = 0;
  for (const Suffix& s : unit.suffixes) {
    common = std::min(common, s.length - 1);
    longest = std::max(longest, s.length);
    const TokenId* first = unit.suffixes[0].tokens;
    common = std::mismatch(s.tokens, s.tokens + common, first).first - s.tokens;
  }
  // No more blocks than the group needed as it came (Check sized those).
  const int64_t p = static_cast<int64_t>(unit.prefix->size());
  while (common > 0 &&
         BlocksFor(p + common, bs) + BlocksFor(longest - common, bs) >
             BlocksFor(p, bs) + BlocksFor(longest, bs)) {
    --common;
  }
  if (common == 0) return;
  unit.extended = std::make_unique<std::vector<TokenId>>(*unit.prefix);
  const TokenId* first = unit.suffixes[0].tokens;
  unit.extended->insert(unit.extended->end(), first, first + common);
  unit.prefix = unit.extended.get();
  for (Suffix& s : unit.suffixes) {
    s.tokens += common;
    s.length -= common;
  }
}

PassPlanner::~PassPlanner() {
  if (in_flight_) Finish(false);
  for (Unit& unit : units_) Drop(unit);
}

void PassPlanner::Drop(Unit& unit) {
  for (BlockId b : unit.chain) blocks_->Unref(b);
  unit.chain.clear();
  if (unit.copy_tokens > 0) blocks_->Unref(unit.copy_from);
  unit.copy_tokens = 0;
}

int64_t PassPlanner::Slot(const std::vector<BlockId>& blocks,
                          int64_t position) const {
  const int64_t bs = blocks_->block_tokens();
  return static_cast<int64_t>(blocks[static_cast<size_t>(position / bs)]) * bs +
         position % bs;
}

void PassPlanner::Start(Unit& unit) {
  unit.started = true;
  const size_t p = unit.prefix->size();
  // A prompt that ends with the prefix needs its last token run.
  const size_t limit = unit.prefix_outputs.empty() ? p : p - 1;
  unit.chain = blocks_->Match(*unit.prefix, limit, depth_);
  for (BlockId b : unit.chain) blocks_->Ref(b);
  unit.held = static_cast<int64_t>(unit.chain.size()) * blocks_->block_tokens();
  ++(unit.chain.empty() ? stats_.prefix_misses : stats_.prefix_hits);
  // The next block may be cached under another continuation (a state's
  // last tokens before another question): its common run is copied, not
  // computed. A prefix segment must follow to carry the copy, so the run
  // stops before the prefix's last token.
  const int64_t room = static_cast<int64_t>(p) - 1 - unit.held;
  if (!unit.chain.empty() && room > 0) {
    const auto usable = [this](BlockId b) {
      return std::find(pass_copied_.begin(), pass_copied_.end(), b) ==
             pass_copied_.end();
    };
    const auto run = blocks_->MatchPartial(
        unit.chain.back(), unit.prefix->data() + unit.held,
        static_cast<int32_t>(std::min<int64_t>(room, blocks_->block_tokens())),
        depth_, usable);
    if (run.has_value()) {
      // Held first: the allocation may evict the oldest unreferenced block.
      blocks_->Ref(run->first);
      if (const std::optional<BlockId> to = blocks_->Allocate()) {
        unit.copy_from = run->first;
        unit.copy_to = *to;
        unit.copy_tokens = run->second;
        unit.chain.push_back(*to);
        unit.held += run->second;
      } else {
        blocks_->Unref(run->first);
      }
    }
  }
  stats_.reused_tokens += unit.held;
}

bool PassPlanner::Grow(Unit& unit, int64_t end) {
  const size_t want =
      static_cast<size_t>(BlocksFor(end, blocks_->block_tokens()));
  const size_t had = unit.chain.size();
  while (unit.chain.size() < want) {
    const std::optional<BlockId> b = blocks_->Allocate();
    if (!b.has_value()) {
      for (size_t i = had; i < unit.chain.size(); ++i) {
        blocks_->Unref(unit.chain[i]);
      }
      unit.chain.resize(had);
      return false;
    }
    unit.chain.push_back(*b);
  }
  return true;
}

void PassPlanner::Close(Unit& unit) {
  pass_refs_.insert(pass_refs_.end(), unit.chain.begin(), unit.chain.end());
  unit.chain.clear();
  unit.finished = true;
}

absl::StatusOr<Pass> PassPlanner::Next(
    const std::function<bool(int32_t)>& live) {
  if (in_flight_) Finish(true);
  in_flight_ = true;
  const int64_t bs = blocks_->block_tokens();
  Pass pass;
  int64_t left = budget_;
  auto stuck = [&](int64_t tokens) {
    return PoolTooSmall(tokens, BlocksFor(tokens, bs), *blocks_);
  };
  for (size_t i = first_open_; i < units_.size() && left > 0; ++i) {
    Unit& u = units_[i];
    if (u.finished) continue;
    if (!live(u.owner)) {
      Drop(u);
      u.finished = true;
      continue;
    }
    if (!u.started) Start(u);
    const int64_t p = static_cast<int64_t>(u.prefix->size());
    if (u.held < p) {
      int64_t take = p - u.held;
      if (take > left) {
        // A chunk that ends on a block boundary, so its blocks are cached.
        take = (u.held + left) / bs * bs - u.held;
        if (take <= 0) {
          if (!pass.segments.empty()) break;
          take = left;
        }
      }
      if (!Grow(u, u.held + take)) {
        if (pass.segments.empty()) return stuck(u.held + take);
        break;
      }
      Segment seg;
      seg.tokens = u.prefix->data() + u.held;
      seg.length = take;
      seg.start = u.held;
      for (int64_t pos = 0; pos < u.held + take; ++pos) {
        seg.keys.push_back(Slot(u.chain, pos));
      }
      if (u.held + take == p) seg.outputs = u.prefix_outputs;
      // Its keys are what the group's suffixes share.
      seg.shared_id = static_cast<int64_t>(i);
      seg.shared_length = u.held + take;
      if (u.copy_tokens > 0) {
        for (int64_t t = 0; t < u.copy_tokens; ++t) {
          pass.copy_from.push_back(int64_t{u.copy_from} * bs + t);
          pass.copy_to.push_back(int64_t{u.copy_to} * bs + t);
        }
        pass_refs_.push_back(u.copy_from);  // until the pass ran
        pass_copied_.push_back(u.copy_to);
        u.copy_tokens = 0;
      }
      // Blocks this segment completes become findable now: a later segment
      // of this pass may attend to them.
      for (int64_t k = u.held / bs; (k + 1) * bs <= u.held + take; ++k) {
        const BlockId parent =
            k == 0 ? -1 : u.chain[static_cast<size_t>(k - 1)];
        const BlockId b = u.chain[static_cast<size_t>(k)];
        if (blocks_->Publish(parent, u.prefix->data() + k * bs, b, depth_)) {
          pass_published_.push_back(b);
        }
      }
      u.held += take;
      left -= take;
      pass.tokens += take;
      pass.segments.push_back(std::move(seg));
      if (u.held < p) break;
    }
    bool full = false;
    while (u.next_suffix < u.suffixes.size()) {
      const Suffix& suffix = u.suffixes[u.next_suffix];
      const int64_t len = suffix.length;
      if (len > left && !pass.segments.empty()) {
        full = true;
        break;
      }
      std::vector<BlockId> own;
      for (int64_t k = 0; k < BlocksFor(len, bs); ++k) {
        const std::optional<BlockId> b = blocks_->Allocate();
        if (!b.has_value()) break;
        own.push_back(*b);
      }
      if (static_cast<int64_t>(own.size()) < BlocksFor(len, bs)) {
        for (BlockId b : own) blocks_->Unref(b);
        if (pass.segments.empty()) return stuck(p + len);
        full = true;
        break;
      }
      Segment seg;
      seg.tokens = suffix.tokens;
      seg.length = len;
      seg.start = p;
      seg.keys.reserve(static_cast<size_t>(p + len));
      for (int64_t pos = 0; pos < p; ++pos) {
        seg.keys.push_back(Slot(u.chain, pos));
      }
      for (int64_t pos = 0; pos < len; ++pos) {
        seg.keys.push_back(Slot(own, pos));
      }
      seg.outputs = {suffix.output};
      seg.shared_id = static_cast<int64_t>(i);
      seg.shared_length = p;
      pass_refs_.insert(pass_refs_.end(), own.begin(), own.end());
      left -= len;
      pass.tokens += len;
      pass.segments.push_back(std::move(seg));
      ++u.next_suffix;
    }
    if (full) break;
    if (u.held == p) Close(u);
  }
  while (first_open_ < units_.size() && units_[first_open_].finished) {
    ++first_open_;
  }
  stats_.computed_tokens += pass.tokens;
  if (pass.segments.empty()) in_flight_ = false;
  return pass;
}

void PassPlanner::Finish(bool ok) {
  if (!in_flight_) return;
  in_flight_ = false;
  if (!ok) {
    for (BlockId b : pass_published_) blocks_->Unpublish(b);
  }
  for (BlockId b : pass_refs_) blocks_->Unref(b);
  pass_published_.clear();
  pass_refs_.clear();
  pass_copied_.clear();
}

}  // namespace mesa_anyjev::engine
