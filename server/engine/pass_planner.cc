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

// A prompt group as the planner works through it: its prefix (the
// cacheable part) in chunks of passes, then its suffixes.
struct PlanWork::Group {
  struct Suffix {
    const TokenId* tokens = nullptr;
    int64_t length = 0;
    int64_t output = 0;
  };
  const std::vector<TokenId>* prefix = nullptr;
  // The group's prefix and the tokens all its suffixes begin with (the
  // same sequences, those tokens computed once), when there are any.
  std::unique_ptr<std::vector<TokenId>> extended;
  std::vector<int64_t> prefix_outputs;  // prompts that end with it
  std::vector<Suffix> suffixes;

  bool started = false;
  // Blocks of prefix positions [0, covered): found in the cache, copied
  // or planned in a pass.
  std::vector<BlockRef> chain;
  int64_t covered = 0;
  size_t next_suffix = 0;
  // Its context in the pass being planned (PassKeys::contexts), -1 when it
  // has none there yet.
  int32_t context = -1;
};

PlanWork::PlanWork() = default;
PlanWork::PlanWork(PlanWork&&) noexcept = default;
PlanWork& PlanWork::operator=(PlanWork&&) noexcept = default;
PlanWork::~PlanWork() = default;

bool PlanWork::done() const { return next_ >= groups_.size(); }

bool PlanWork::open() const {
  return !done() && groups_[next_].started &&
         (groups_[next_].covered > 0 || groups_[next_].next_suffix > 0);
}

std::string PoolShortfall::Describe(const char* pool) const {
  return absl::StrCat("a prompt group of ", tokens, " tokens needs ",
                      blocks_needed, " KV blocks of ", block_tokens,
                      " tokens; ", pool, " holds ", pool_blocks);
}

absl::Status PassPlanner::Check(const std::vector<PromptGroup>& groups,
                                const KvBlocks& blocks,
                                std::optional<PoolShortfall>* shortfall) {
  const int64_t bs = blocks.block_tokens();
  for (const PromptGroup& group : groups) {
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

PassPlanner::PassPlanner(KvBlocks* blocks, int64_t budget)
    : blocks_(blocks),
      budget_(std::max<int64_t>(budget, 1)),
      pass_budget_(budget_) {}

PlanWork PassPlanner::Prepare(const std::vector<PromptGroup>& groups,
                              int64_t owner) const {
  PlanWork work;
  work.owner_ = owner;
  int64_t first_output = 0;
  for (const PromptGroup& group : groups) {
    if (group.prefix.empty()) {
      // Whole prompts: each is a cacheable prefix of its own.
      for (size_t i = 0; i < group.suffixes.size(); ++i) {
        Group state;
        state.prefix = &group.suffixes[i];
        state.prefix_outputs = {first_output + static_cast<int64_t>(i)};
        work.groups_.push_back(std::move(state));
      }
    } else {
      Group state;
      state.prefix = &group.prefix;
      for (size_t i = 0; i < group.suffixes.size(); ++i) {
        const int64_t out = first_output + static_cast<int64_t>(i);
        const std::vector<TokenId>& suffix = group.suffixes[i];
        if (suffix.empty()) {
          state.prefix_outputs.push_back(out);
        } else {
          state.suffixes.push_back(
              {suffix.data(), static_cast<int64_t>(suffix.size()), out});
        }
      }
      ExtendPrefix(state, blocks_->block_tokens());
      work.groups_.push_back(std::move(state));
    }
    first_output += static_cast<int64_t>(group.suffixes.size());
  }
  // Prompts that share a beginning run next to each other (a state's
  // questions after the state), so its blocks are still cached.
  std::stable_sort(work.groups_.begin(), work.groups_.end(),
                   [](const Group& a, const Group& b) {
                     return std::lexicographical_compare(
                         a.prefix->begin(), a.prefix->end(), b.prefix->begin(),
                         b.prefix->end());
                   });
  return work;
}

void PassPlanner::ExtendPrefix(Group& group, int64_t bs) {
  // A prompt that ends with the prefix owes its output at the prefix's end.
  if (group.suffixes.size() < 2 || !group.prefix_outputs.empty()) return;
  // The tokens every suffix begins with; each suffix keeps one at least.
  int64_t common = group.suffixes[0].length - 1, longest = 0;
  for (const Group::Suffix& s : group.suffixes) {
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
  for (Group::Suffix& s : group.suffixes) {
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

void PassPlanner::Start(Group& group) {
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

int32_t PassPlanner::ContextOf(Group& group, int64_t end) {
  if (group.context < 0) {
    model::PassKeys& keys = pass_.plan.keys;
    group.context = static_cast<int32_t>(keys.contexts.size());
    std::vector<int64_t>& slots = keys.contexts.emplace_back();
    slots.reserve(static_cast<size_t>(end));
    for (int64_t pos = 0; pos < end; ++pos) {
      slots.push_back(Slot(group.chain, pos));
    }
  }
  return group.context;
}

bool PassPlanner::Grow(Group& group, int64_t end) {
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

void PassPlanner::Close(Group& group) { in_flight_->Hold(group.chain); }

void PassPlanner::Drop(PlanWork& work) {
  for (Group& group : work.groups_) group.chain.clear();
  work.next_ = work.groups_.size();
}

void PassPlanner::Append(model::SegmentKeys keys, const TokenId* tokens,
                         int64_t owner, const std::vector<int64_t>& outputs) {
  model::PassArrays& a = pass_.plan.arrays;
  for (int64_t t = 0; t < keys.length; ++t) {
    a.tokens.push_back(tokens[t]);
    a.positions.push_back(keys.start + t);
    a.slots.push_back(pass_.plan.keys.OwnSlot(keys, t));
  }
  for (int64_t out : outputs) {
    a.rows.push_back(static_cast<int64_t>(a.tokens.size()) - 1);
    pass_.rows.push_back({owner, out});
  }
  pass_.tokens += keys.length;
  pass_.plan.keys.segments.push_back(std::move(keys));
}

absl::Status PassPlanner::Begin(int32_t layers, int64_t budget) {
  if (in_flight_.has_value()) {
    return absl::FailedPreconditionError(
        "PassPlanner::Begin: the last pass is not finished");
  }
  layers_ = layers;
  pass_budget_ = budget > 0 ? std::min(budget, budget_) : budget_;
  pass_ = PlannedPass{};
  in_flight_.emplace(blocks_);
  return absl::OkStatus();
}

absl::StatusOr<bool> PassPlanner::Add(PlanWork& work) {
  if (!in_flight_.has_value()) {
    return absl::FailedPreconditionError("PassPlanner::Add before Begin");
  }
  if (work.done()) return pass_.tokens < pass_budget_;
  Group& group = work.groups_[work.next_];
  if (!group.started) Start(group);
  absl::StatusOr<bool> room = PlanPrefix(group, work.owner_);
  if (room.ok() && *room) room = PlanSuffixes(group, work.owner_);
  group.context = -1;  // contexts are the pass's
  if (!room.ok() || !*room) return room;
  Close(group);
  ++work.next_;
  return pass_.tokens < pass_budget_;
}

PlannedPass PassPlanner::Take() {
  if (in_flight_.has_value()) {
    pass_.plan.arrays.copy_from = in_flight_->copy_from();
    pass_.plan.arrays.copy_to = in_flight_->copy_to();
    if (pass_.plan.keys.segments.empty()) in_flight_.reset();
  }
  stats_.computed_tokens += pass_.tokens;
  PlannedPass out = std::move(pass_);
  pass_ = PlannedPass{};
  return out;
}

absl::StatusOr<bool> PassPlanner::PlanPrefix(Group& group, int64_t owner) {
  const int64_t bs = blocks_->block_tokens();
  const int64_t p = static_cast<int64_t>(group.prefix->size());
  const int64_t room = pass_budget_ - pass_.tokens;
  const bool empty = pass_.plan.keys.segments.empty();
  int64_t take = p - group.covered;
  if (take == 0) return true;
  if (take > room) {
    // A chunk that ends on a block boundary, so its blocks are cached.
    take = (group.covered + room) / bs * bs - group.covered;
    if (take <= 0) {
      if (!empty) return false;
      take = room;
    }
  }
  const int64_t end = group.covered + take;
  if (!Grow(group, end)) {
    if (!empty) return false;
    return PoolTooSmall(end, BlocksFor(end, bs), *blocks_, &shortfall_);
  }
  // Its tokens' keys are the last of its context: the suffixes that follow
  // in this pass share them.
  model::SegmentKeys keys;
  keys.length = take;
  keys.start = group.covered;
  keys.context = ContextOf(group, end);
  PublishCompleted(group, end);
  const TokenId* tokens = group.prefix->data() + group.covered;
  group.covered = end;
  Append(std::move(keys), tokens, owner,
         end == p ? group.prefix_outputs : std::vector<int64_t>{});
  return end == p;
}

void PassPlanner::PublishCompleted(const Group& group, int64_t end) {
  // Findable from now: a later segment of this pass may attend to them.
  const int64_t bs = blocks_->block_tokens();
  for (int64_t k = group.covered / bs; (k + 1) * bs <= end; ++k) {
    const BlockId parent =
        k == 0 ? -1 : group.chain[static_cast<size_t>(k - 1)].id();
    in_flight_->Publish(parent, group.prefix->data() + k * bs,
                        group.chain[static_cast<size_t>(k)].id(), layers_);
  }
}

absl::StatusOr<bool> PassPlanner::PlanSuffixes(Group& group, int64_t owner) {
  const int64_t bs = blocks_->block_tokens();
  const int64_t p = group.covered;  // the whole prefix by now
  for (; group.next_suffix < group.suffixes.size(); ++group.next_suffix) {
    const Group::Suffix& suffix = group.suffixes[group.next_suffix];
    const int64_t len = suffix.length;
    const bool empty = pass_.plan.keys.segments.empty();
    if (len > pass_budget_ - pass_.tokens && !empty) return false;
    std::vector<BlockRef> own;
    while (static_cast<int64_t>(own.size()) < BlocksFor(len, bs)) {
      std::optional<BlockRef> b = blocks_->Allocate();
      if (!b.has_value()) break;
      own.push_back(std::move(*b));
    }
    if (static_cast<int64_t>(own.size()) < BlocksFor(len, bs)) {
      if (!empty) return false;
      return PoolTooSmall(p + len, BlocksFor(p + len, bs), *blocks_,
                          &shortfall_);
    }
    model::SegmentKeys keys;
    keys.length = len;
    keys.start = p;
    keys.context = ContextOf(group, p);
    keys.own.reserve(static_cast<size_t>(len));
    for (int64_t pos = 0; pos < len; ++pos) {
      keys.own.push_back(Slot(own, pos));
    }
    in_flight_->Hold(own);
    Append(std::move(keys), suffix.tokens, owner, {suffix.output});
  }
  return true;
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
