#include "server/engine/pass_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::engine {
namespace {

int64_t BlocksFor(int64_t tokens, int64_t bs) { return (tokens + bs - 1) / bs; }

absl::Status PoolTooSmall(int64_t tokens, int64_t need, const KvBlocks& blocks,
                          std::optional<PoolShortfall>* shortfall) {
  const PoolShortfall sizes{tokens, need, blocks.block_tokens(),
                            blocks.num_blocks()};
  if (shortfall != nullptr) *shortfall = sizes;
  return absl::ResourceExhaustedError(sizes.Describe("the pool"));
}

}  // namespace

std::string PoolShortfall::Describe(const char* pool) const {
  return absl::StrCat("a prompt group of ", tokens, " tokens needs ",
                      blocks_needed, " KV blocks of ", block_tokens,
                      " tokens; ", pool, " holds ", pool_blocks);
}

absl::Status PassPlanner::Check(const std::vector<PlanGroup>& groups,
                                const KvBlocks& blocks,
                                std::optional<PoolShortfall>* shortfall) {
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
        return PoolTooSmall(s, BlocksFor(s, bs), blocks, shortfall);
      }
      longest = std::max(longest, s);
    }
    const int64_t need = BlocksFor(p, bs) + BlocksFor(longest, bs);
    if (p > 0 && need > blocks.num_blocks()) {
      return PoolTooSmall(p + longest, need, blocks, shortfall);
    }
  }
  return absl::OkStatus();
}

PassPlanner::PassPlanner(KvBlocks* blocks, const std::vector<PlanGroup>& groups,
                         int32_t layers, int64_t budget)
    : blocks_(blocks), layers_(layers), budget_(std::max<int64_t>(budget, 1)) {
  for (const PlanGroup& g : groups) {
    const PromptGroup& group = *g.group;
    if (group.prefix.empty()) {
      // Whole prompts: each is a cacheable prefix of its own.
      for (size_t i = 0; i < group.suffixes.size(); ++i) {
        GroupState state;
        state.prefix = &group.suffixes[i];
        state.prefix_outputs = {g.first_output + static_cast<int64_t>(i)};
        state.owner = g.owner;
        groups_.push_back(std::move(state));
      }
      continue;
    }
    GroupState state;
    state.prefix = &group.prefix;
    state.owner = g.owner;
    for (size_t i = 0; i < group.suffixes.size(); ++i) {
      const int64_t out = g.first_output + static_cast<int64_t>(i);
      const std::vector<TokenId>& suffix = group.suffixes[i];
      if (suffix.empty()) {
        state.prefix_outputs.push_back(out);
      } else {
        state.suffixes.push_back(
            {suffix.data(), static_cast<int64_t>(suffix.size()), out});
      }
    }
    ExtendPrefix(state, blocks_->block_tokens());
    groups_.push_back(std::move(state));
  }
  // Prompts that share a beginning run next to each other (a state's
  // questions after the state), so its blocks are still cached.
  std::stable_sort(groups_.begin(), groups_.end(),
                   [](const GroupState& a, const GroupState& b) {
                     return std::lexicographical_compare(
                         a.prefix->begin(), a.prefix->end(), b.prefix->begin(),
                         b.prefix->end());
                   });
}

void PassPlanner::ExtendPrefix(GroupState& group, int64_t bs) {
  // A prompt that ends with the prefix owes its output at the prefix's end.
  if (group.suffixes.size() < 2 || !group.prefix_outputs.empty()) return;
  // The tokens every suffix begins with; each suffix keeps one at least.
  int64_t common = group.suffixes[0].length - 1, longest = 0;
  for (const Suffix& s : group.suffixes) {
    common = std::min(common, s.length - 1);
    longest = std::max(longest, s.length);
    const TokenId* first = group.suffixes[0].tokens;
    common = std::mismatch(s.tokens, s.tokens + common, first).first - s.tokens;
  }
  // No more blocks than the group needed as it came (Check sized those).
  const int64_t p = static_cast<int64_t>(group.prefix->size());
  while (common > 0 &&
         BlocksFor(p + common, bs) + BlocksFor(longest - common, bs) >
             BlocksFor(p, bs) + BlocksFor(longest, bs)) {
    --common;
  }
  if (common == 0) return;
  group.extended = std::make_unique<std::vector<TokenId>>(*group.prefix);
  const TokenId* first = group.suffixes[0].tokens;
  group.extended->insert(group.extended->end(), first, first + common);
  group.prefix = group.extended.get();
  for (Suffix& s : group.suffixes) {
    s.tokens += common;
    s.length -= common;
  }
}

int64_t PassPlanner::Slot(const std::vector<BlockRef>& blocks,
                          int64_t position) const {
  const int64_t bs = blocks_->block_tokens();
  return int64_t{blocks[static_cast<size_t>(position / bs)].id()} * bs +
         position % bs;
}

void PassPlanner::Start(GroupState& group) {
  group.started = true;
  const size_t p = group.prefix->size();
  // A prompt that ends with the prefix needs its last token run.
  const size_t limit = group.prefix_outputs.empty() ? p : p - 1;
  group.chain = blocks_->Match(*group.prefix, limit, layers_);
  group.covered =
      static_cast<int64_t>(group.chain.size()) * blocks_->block_tokens();
  ++(group.chain.empty() ? stats_.prefix_misses : stats_.prefix_hits);
  // The next block may be cached under another continuation (a state's
  // last tokens before another question): its common run is copied in this
  // pass, not computed. A prefix segment must still compute the prefix's
  // last token, so the run stops before it.
  const int64_t room = static_cast<int64_t>(p) - 1 - group.covered;
  if (!group.chain.empty() && room > 0) {
    std::optional<KvBlocks::PartialMatch> run = blocks_->MatchPartial(
        group.chain.back().id(), group.prefix->data() + group.covered,
        static_cast<int32_t>(std::min<int64_t>(room, blocks_->block_tokens())),
        layers_, [this](BlockId b) { return !in_flight_->CopiesInto(b); });
    if (run.has_value()) {
      const int32_t tokens = run->tokens;
      if (std::optional<BlockRef> into = in_flight_->CopyRun(std::move(*run))) {
        group.chain.push_back(std::move(*into));
        group.covered += tokens;
      }
    }
  }
  stats_.reused_tokens += group.covered;
}

int32_t PassPlanner::ContextOf(GroupState& group, int64_t end,
                               Pass& pass) const {
  if (group.context < 0) {
    group.context = static_cast<int32_t>(pass.keys.contexts.size());
    std::vector<int64_t>& slots = pass.keys.contexts.emplace_back();
    slots.reserve(static_cast<size_t>(end));
    for (int64_t pos = 0; pos < end; ++pos) {
      slots.push_back(Slot(group.chain, pos));
    }
  }
  return group.context;
}

bool PassPlanner::Grow(GroupState& group, int64_t end) {
  const size_t want =
      static_cast<size_t>(BlocksFor(end, blocks_->block_tokens()));
  std::vector<BlockRef> more;
  while (group.chain.size() + more.size() < want) {
    std::optional<BlockRef> b = blocks_->Allocate();
    if (!b.has_value()) return false;  // `more` goes back
    more.push_back(std::move(*b));
  }
  for (BlockRef& b : more) group.chain.push_back(std::move(b));
  return true;
}

void PassPlanner::Close(GroupState& group) {
  in_flight_->Hold(group.chain);
  group.finished = true;
}

void PassPlanner::Drop(GroupState& group) {
  group.chain.clear();
  group.finished = true;
}

absl::StatusOr<Pass> PassPlanner::Next(
    const std::function<bool(int32_t)>& live) {
  if (in_flight_.has_value()) {
    return absl::FailedPreconditionError(
        "PassPlanner::Next: the last pass is not finished");
  }
  in_flight_.emplace(blocks_);
  Pass pass;
  for (size_t i = first_open_; i < groups_.size() && pass.tokens < budget_;
       ++i) {
    GroupState& group = groups_[i];
    if (group.finished) continue;
    if (!live(group.owner)) {
      Drop(group);
      continue;
    }
    if (!group.started) Start(group);
    absl::StatusOr<Room> room = PlanPrefix(group, pass);
    if (room.ok() && *room == Room::kLeft) room = PlanSuffixes(group, pass);
    group.context = -1;  // contexts are the pass's
    if (!room.ok()) {
      in_flight_.reset();
      return room.status();
    }
    if (*room == Room::kFull) break;
    Close(group);
  }
  pass.copy_from = in_flight_->copy_from();
  pass.copy_to = in_flight_->copy_to();
  while (first_open_ < groups_.size() && groups_[first_open_].finished) {
    ++first_open_;
  }
  stats_.computed_tokens += pass.tokens;
  if (pass.segments.empty()) in_flight_.reset();
  return pass;
}

absl::StatusOr<PassPlanner::Room> PassPlanner::PlanPrefix(GroupState& group,
                                                          Pass& pass) {
  const int64_t bs = blocks_->block_tokens();
  const int64_t p = static_cast<int64_t>(group.prefix->size());
  const int64_t room = budget_ - pass.tokens;
  int64_t take = p - group.covered;
  if (take == 0) return Room::kLeft;
  if (take > room) {
    // A chunk that ends on a block boundary, so its blocks are cached.
    take = (group.covered + room) / bs * bs - group.covered;
    if (take <= 0) {
      if (!pass.segments.empty()) return Room::kFull;
      take = room;
    }
  }
  const int64_t end = group.covered + take;
  if (!Grow(group, end)) {
    if (!pass.segments.empty()) return Room::kFull;
    return PoolTooSmall(end, BlocksFor(end, bs), *blocks_, &shortfall_);
  }
  // Its tokens' keys are the last of its context: the suffixes that follow
  // in this pass share them.
  model::SegmentKeys keys;
  keys.length = take;
  keys.start = group.covered;
  keys.context = ContextOf(group, end, pass);
  Segment seg;
  seg.tokens = group.prefix->data() + group.covered;
  if (end == p) seg.outputs = group.prefix_outputs;
  PublishCompleted(group, end);
  group.covered = end;
  pass.tokens += take;
  pass.keys.segments.push_back(std::move(keys));
  pass.segments.push_back(std::move(seg));
  return end < p ? Room::kFull : Room::kLeft;
}

void PassPlanner::PublishCompleted(const GroupState& group, int64_t end) {
  // Findable from now: a later segment of this pass may attend to them.
  const int64_t bs = blocks_->block_tokens();
  for (int64_t k = group.covered / bs; (k + 1) * bs <= end; ++k) {
    const BlockId parent =
        k == 0 ? -1 : group.chain[static_cast<size_t>(k - 1)].id();
    in_flight_->Publish(parent, group.prefix->data() + k * bs,
                        group.chain[static_cast<size_t>(k)].id(), layers_);
  }
}

absl::StatusOr<PassPlanner::Room> PassPlanner::PlanSuffixes(GroupState& group,
                                                            Pass& pass) {
  const int64_t bs = blocks_->block_tokens();
  const int64_t p = group.covered;  // the whole prefix by now
  for (; group.next_suffix < group.suffixes.size(); ++group.next_suffix) {
    const Suffix& suffix = group.suffixes[group.next_suffix];
    const int64_t len = suffix.length;
    if (len > budget_ - pass.tokens && !pass.segments.empty()) {
      return Room::kFull;
    }
    std::vector<BlockRef> own;
    while (static_cast<int64_t>(own.size()) < BlocksFor(len, bs)) {
      std::optional<BlockRef> b = blocks_->Allocate();
      if (!b.has_value()) break;
      own.push_back(std::move(*b));
    }
    if (static_cast<int64_t>(own.size()) < BlocksFor(len, bs)) {
      if (!pass.segments.empty()) return Room::kFull;
      return PoolTooSmall(p + len, BlocksFor(p + len, bs), *blocks_,
                          &shortfall_);
    }
    model::SegmentKeys keys;
    keys.length = len;
    keys.start = p;
    keys.context = ContextOf(group, p, pass);
    keys.own.reserve(static_cast<size_t>(len));
    for (int64_t pos = 0; pos < len; ++pos) {
      keys.own.push_back(Slot(own, pos));
    }
    in_flight_->Hold(own);
    pass.tokens += len;
    pass.keys.segments.push_back(std::move(keys));
    pass.segments.push_back({suffix.tokens, {suffix.output}});
  }
  return Room::kLeft;
}

void PassPlanner::Finish(bool ok) {
  if (!in_flight_.has_value()) return;
  if (ok) {
    in_flight_->Commit();
  } else {
    in_flight_->Abort();
  }
  in_flight_.reset();
}

}  // namespace mesa_anyjev::engine
