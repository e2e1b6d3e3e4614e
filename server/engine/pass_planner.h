// Plans forward passes from the prompt groups of many calls: each pass is a
// list of segments (tokens, first position, the KV slots they attend to,
// the outputs they owe), filled up to a token budget, with the KV held in
// KvBlocks. A group's prefix is looked up in the prefix cache to the block;
// what is not cached runs as a segment of the same pass as its suffixes
// (each layer computes every key of the pass before attention, so a segment
// may attend to one planned before it), in chunks when it is longer than
// the budget. Inside a call, groups run in order of their prefixes' tokens,
// so the questions about one state follow each other while the state is
// cached. Which call's group comes next is the caller's choice (the engine's
// scheduler): Add plans one group of the call it is given.
//
// A pass is written straight into the runner's form (model::PassPlan: the
// keys and the flat arrays), with each output row's owner beside it.
// Tensor-free, so the same planning runs on every device and is unit tested
// on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend.h"
#include "server/engine/kv_blocks.h"
#include "server/engine/pass_lease.h"
#include "server/model/pass_plan.h"

namespace mesa_anyjev::engine {

// Whose output a row of a pass is: the call (`owner`, the engine's number
// for it) and its output there (groups in order, then suffixes).
struct RowOwner {
  int64_t owner = 0;
  int64_t output = 0;
};

struct PlannedPass {
  model::PassPlan plan;        // keys and arrays; the reading is the caller's
  std::vector<RowOwner> rows;  // aligned with plan.arrays.rows
  int64_t tokens = 0;          // new tokens
  int64_t segments() const {
    return static_cast<int64_t>(plan.keys.segments.size());
  }
};

// A prompt group the KV pool cannot hold even alone: the sizes, for the
// caller to word (the planner knows no configuration, so it cannot say
// which setting sizes the pool).
struct PoolShortfall {
  int64_t tokens = 0;  // the group's prefix and longest suffix
  int64_t blocks_needed = 0;
  int64_t block_tokens = 0;
  int64_t pool_blocks = 0;

  // "a prompt group of N tokens needs M KV blocks of B tokens; <pool> holds
  // K".
  std::string Describe(const char* pool) const;
};

struct PlanStats {
  int64_t prefix_hits = 0, prefix_misses = 0;
  int64_t reused_tokens = 0;    // prefix positions found in the cache
  int64_t computed_tokens = 0;  // tokens run through the model
};

class PassPlanner;

// One call's prompt groups as the planner works through them.
class PlanWork {
 public:
  PlanWork(PlanWork&&) noexcept;
  PlanWork& operator=(PlanWork&&) noexcept;
  ~PlanWork();

  // Every group planned (or dropped): nothing left to add.
  bool done() const;
  // A group is part-planned (a prefix longer than the budget, or suffixes
  // that did not fit): it holds KV blocks across passes, so it goes first
  // in the next pass (the pool must never be split between two of them).
  bool open() const;
  int64_t owner() const { return owner_; }

 private:
  friend class PassPlanner;
  struct Group;
  PlanWork();
  std::vector<Group> groups_;
  size_t next_ = 0;
  int64_t owner_ = 0;
};

class PassPlanner {
 public:
  // `budget`: new tokens per pass (a single suffix longer than that runs
  // alone).
  PassPlanner(KvBlocks* blocks, int64_t budget);
  PassPlanner(const PassPlanner&) = delete;
  PassPlanner& operator=(const PassPlanner&) = delete;

  // RESOURCE_EXHAUSTED with the sizes (also in *shortfall when given) when
  // a group cannot fit the pool even alone; INVALID_ARGUMENT for a prompt
  // with no tokens. Before any work.
  static absl::Status Check(const std::vector<PromptGroup>& groups,
                            const KvBlocks& blocks,
                            std::optional<PoolShortfall>* shortfall = nullptr);

  // `groups` (which outlive the work) of the call `owner`, in prefix order.
  PlanWork Prepare(const std::vector<PromptGroup>& groups, int64_t owner) const;

  // A new pass whose segments run `layers` transformer layers (cached
  // blocks must cover them), of at most `budget` new tokens when given
  // (never more than the planner's). FAILED_PRECONDITION while the last
  // pass is not finished.
  absl::Status Begin(int32_t layers, int64_t budget = 0);
  // Plans `work`'s next group into the pass begun: true while the pass has
  // room after it, false once full (the group may be left part-planned:
  // work.open()). RESOURCE_EXHAUSTED (the sizes in shortfall()) when the
  // pool cannot hold the group even in an empty pass.
  absl::StatusOr<bool> Add(PlanWork& work);
  int64_t pass_tokens() const { return pass_.tokens; }
  // The pass planned since Begin. An empty one (nothing was added) is not
  // in flight: Begin may follow at once.
  PlannedPass Take();
  // After the pass ran, or failed: its new cache entries are withdrawn.
  void Finish(bool ok);
  // What `work` holds goes back (its caller stopped); it is done.
  void Drop(PlanWork& work);

  const PlanStats& stats() const { return stats_; }
  // The sizes behind Add's last RESOURCE_EXHAUSTED, if it gave one.
  const std::optional<PoolShortfall>& shortfall() const { return shortfall_; }

 private:
  using Group = PlanWork::Group;

  int64_t Slot(const std::vector<BlockRef>& blocks, int64_t position) const;
  // Moves the tokens all of a group's suffixes begin with into its prefix.
  static void ExtendPrefix(Group& group, int64_t bs);
  // Finds the group's prefix in the cache, and copies a run of a cached
  // block past it in this pass.
  void Start(Group& group);
  // The group's context in the pass: its chain's slots of positions
  // [0, end), added once per pass.
  int32_t ContextOf(Group& group, int64_t end);
  // The prefix's next chunk, as much as the pass has room for; false when
  // the pass is full.
  absl::StatusOr<bool> PlanPrefix(Group& group, int64_t owner);
  // The blocks a prefix segment ending at `end` completes join the cache.
  void PublishCompleted(const Group& group, int64_t end);
  // The group's suffixes, each a segment of its own, while they fit.
  absl::StatusOr<bool> PlanSuffixes(Group& group, int64_t owner);
  // A segment's tokens, positions, KV slots and output rows, into the pass.
  void Append(model::SegmentKeys keys, const TokenId* tokens, int64_t owner,
              const std::vector<int64_t>& outputs);
  // Appends blocks to `group.chain` until it covers `end` positions; false
  // (nothing appended) when the pool is full.
  bool Grow(Group& group, int64_t end);
  void Close(Group& group);  // its chain passes to the pass's lease

  KvBlocks* const blocks_;
  const int64_t budget_;
  int64_t pass_budget_;  // this pass's (Begin)
  int32_t layers_ = 0;
  PlannedPass pass_;
  PlanStats stats_;
  std::optional<PoolShortfall> shortfall_;
  // What the pass in flight holds; declared last, so a planner destroyed
  // mid-pass aborts it first.
  std::optional<PassLease> in_flight_;
};

}  // namespace mesa_anyjev::engine
