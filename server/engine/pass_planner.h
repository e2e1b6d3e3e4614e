// Plans forward passes from prompt groups of one call or of many: each pass
// is a list of segments (tokens, first position, the KV slots they attend
// to, the outputs they owe), filled up to a token budget, with the KV held
// in KvBlocks. A group's prefix is looked up in the prefix cache to the
// block; what is not cached runs as a segment of the same pass as its
// suffixes (each layer computes every key of the pass before attention, so
// a segment may attend to one planned before it), in chunks when it is
// longer than the budget. Groups run in order of their prefixes' tokens, so
// the questions about one state follow each other while the state is
// cached. Tensor-free, so the same planning runs on every device and is unit
// tested on its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend.h"
#include "server/engine/kv_blocks.h"
#include "server/engine/pass_lease.h"
#include "server/model/pass_keys.h"

namespace mesa_anyjev::engine {

// One prompt group of one call. Prompt i's output is `first_output + i`.
struct PlanGroup {
  const PromptGroup* group = nullptr;
  int32_t owner = 0;  // which call, for cancellation
  int64_t first_output = 0;
};

// What a segment of a pass computes beside its keys (Pass::keys, the same
// index): its tokens and the outputs it owes at its last token (several
// prompts may end there).
struct Segment {
  const TokenId* tokens = nullptr;
  std::vector<int64_t> outputs;
};

struct Pass {
  // The keys each segment sees, in the one form attention reads.
  model::PassKeys keys;
  std::vector<Segment> segments;  // aligned with keys.segments
  int64_t tokens = 0;
  // Pool slots whose keys and values are copied, copy_from[i] to
  // copy_to[i], at every layer after the pass's own are written and before
  // attention: a prefix that continues part of a cached block starts from
  // that block's run instead of computing it again (PassLease::CopyRun).
  std::vector<int64_t> copy_from, copy_to;
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

class PassPlanner {
 public:
  // `layers`: transformer layers every pass runs (cached blocks must cover
  // them). `budget`: new tokens per pass (a single suffix longer than that
  // runs alone).
  PassPlanner(KvBlocks* blocks, const std::vector<PlanGroup>& groups,
              int32_t layers, int64_t budget);
  PassPlanner(const PassPlanner&) = delete;
  PassPlanner& operator=(const PassPlanner&) = delete;

  // RESOURCE_EXHAUSTED with the sizes (also in *shortfall when given) when
  // a group cannot fit the pool even alone; INVALID_ARGUMENT for a prompt
  // with no tokens. Before any work.
  static absl::Status Check(const std::vector<PlanGroup>& groups,
                            const KvBlocks& blocks,
                            std::optional<PoolShortfall>* shortfall = nullptr);

  // The next pass over the groups whose owner is `live` (the others are
  // dropped and their blocks released); an empty pass when all are done.
  // FAILED_PRECONDITION while the last pass is not finished.
  absl::StatusOr<Pass> Next(const std::function<bool(int32_t)>& live);
  // After the pass ran, or failed: its new cache entries are withdrawn.
  void Finish(bool ok);

  const PlanStats& stats() const { return stats_; }
  // The sizes behind Next's last RESOURCE_EXHAUSTED, if it gave one.
  const std::optional<PoolShortfall>& shortfall() const { return shortfall_; }

 private:
  struct Suffix {
    const TokenId* tokens = nullptr;
    int64_t length = 0;
    int64_t output = 0;
  };
  // A prompt group as the planner works through it: its prefix (the
  // cacheable part) in chunks of passes, then its suffixes.
  struct GroupState {
    const std::vector<TokenId>* prefix = nullptr;
    // The group's prefix and the tokens all its suffixes begin with (the
    // same sequences, those tokens computed once), when there are any.
    std::unique_ptr<std::vector<TokenId>> extended;
    std::vector<int64_t> prefix_outputs;  // prompts that end with it
    std::vector<Suffix> suffixes;
    int32_t owner = 0;

    bool started = false, finished = false;
    // Blocks of prefix positions [0, covered): found in the cache, copied
    // or planned in a pass.
    std::vector<BlockRef> chain;
    int64_t covered = 0;
    size_t next_suffix = 0;
    // Its context in the pass being planned (Pass::keys.contexts), -1 when
    // it has none there yet.
    int32_t context = -1;
  };
  // Whether a step of Next left room in the pass for what comes after it.
  enum class Room { kLeft, kFull };

  int64_t Slot(const std::vector<BlockRef>& blocks, int64_t position) const;
  // Moves the tokens all of a group's suffixes begin with into its prefix.
  static void ExtendPrefix(GroupState& group, int64_t bs);
  // Finds the group's prefix in the cache, and copies a run of a cached
  // block past it in this pass.
  void Start(GroupState& group);
  // The group's context in `pass`: its chain's slots of positions [0, end),
  // added once per pass.
  int32_t ContextOf(GroupState& group, int64_t end, Pass& pass) const;
  // The prefix's next chunk, as much as the pass has room for.
  absl::StatusOr<Room> PlanPrefix(GroupState& group, Pass& pass);
  // The blocks a prefix segment ending at `end` completes join the cache.
  void PublishCompleted(const GroupState& group, int64_t end);
  // The group's suffixes, each a segment of its own, while they fit.
  absl::StatusOr<Room> PlanSuffixes(GroupState& group, Pass& pass);
  // Appends blocks to `group.chain` until it covers `end` positions; false
  // (nothing appended) when the pool is full.
  bool Grow(GroupState& group, int64_t end);
  void Close(GroupState& group);  // its chain passes to the pass's lease
  void Drop(GroupState& group);   // releases what it holds

  KvBlocks* const blocks_;
  const int32_t layers_;
  const int64_t budget_;
  std::vector<GroupState> groups_;
  size_t first_open_ = 0;
  PlanStats stats_;
  std::optional<PoolShortfall> shortfall_;
  // What the pass in flight holds; declared last, so a planner destroyed
  // mid-pass aborts it first.
  std::optional<PassLease> in_flight_;
};

}  // namespace mesa_anyjev::engine
