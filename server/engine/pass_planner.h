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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend.h"
#include "server/engine/kv_blocks.h"

namespace mesa_anyjev::engine {

// One prompt group of one call. Prompt i's output is `first_output + i`.
struct PlanGroup {
  const PromptGroup* group = nullptr;
  int32_t owner = 0;  // which call, for cancellation
  int64_t first_output = 0;
};

struct Segment {
  const TokenId* tokens = nullptr;
  int64_t length = 0;
  int64_t start = 0;  // position of tokens[0]
  // Pool slots of positions [0, start + length): the keys it attends to,
  // ending with its own tokens' (where their keys and values are written).
  std::vector<int64_t> keys;
  // Outputs owed at its last token (several prompts may end there).
  std::vector<int64_t> outputs;
  // The segments of one group (its prefix's part in this pass, whose keys
  // are all of the prefix's, and its suffixes) share keys[0,
  // shared_length): attention may read those once for all of them.
  int64_t shared_id = -1;
  int64_t shared_length = 0;
};

struct Pass {
  std::vector<Segment> segments;
  int64_t tokens = 0;
  // Pool slots whose keys and values are copied, copy_from[i] to
  // copy_to[i], at every layer after the pass's own are written and before
  // attention: a prefix that continues part of a cached block
  // (KvBlocks::MatchPartial) starts from that block's run instead of
  // computing it again.
  std::vector<int64_t> copy_from, copy_to;
};

struct PlanStats {
  int64_t prefix_hits = 0, prefix_misses = 0;
  int64_t reused_tokens = 0;    // prefix positions found in the cache
  int64_t computed_tokens = 0;  // tokens run through the model
};

class PassPlanner {
 public:
  // `depth`: transformer blocks every pass runs (cached blocks must cover
  // it). `budget`: new tokens per pass (a single suffix longer than that
  // runs alone).
  PassPlanner(KvBlocks* blocks, const std::vector<PlanGroup>& groups,
              int32_t depth, int64_t budget);
  ~PassPlanner();  // releases every block still held
  PassPlanner(const PassPlanner&) = delete;
  PassPlanner& operator=(const PassPlanner&) = delete;

  // RESOURCE_EXHAUSTED naming the pool when a group cannot fit the pool even
  // alone; INVALID_ARGUMENT for a prompt with no tokens. Before any work.
  static absl::Status Check(const std::vector<PlanGroup>& groups,
                            const KvBlocks& blocks);

  // The next pass over the groups whose owner is `live` (the others are
  // dropped and their blocks released); an empty pass when all are done.
  absl::StatusOr<Pass> Next(const std::function<bool(int32_t)>& live);
  // After the pass ran (or failed: its new cache entries are withdrawn).
  void Finish(bool ok);

  const PlanStats& stats() const { return stats_; }

 private:
  struct Suffix {
    const TokenId* tokens = nullptr;
    int64_t length = 0;
    int64_t output = 0;
  };
  struct Unit {
    const std::vector<TokenId>* prefix = nullptr;  // the cacheable part
    // The group's prefix and the tokens all its suffixes begin with (the
    // same sequences, those tokens computed once), when there are any.
    std::unique_ptr<std::vector<TokenId>> extended;
    std::vector<int64_t> prefix_outputs;  // prompts that end with it
    std::vector<Suffix> suffixes;
    int32_t owner = 0;
    // Progress
    bool started = false, finished = false;
    std::vector<BlockId> chain;  // blocks of prefix positions [0, held)
    int64_t held = 0;
    // A partial match not yet copied: its first `copy_tokens` positions of
    // `copy_from` (referenced) go to `copy_to` with its first segment.
    BlockId copy_from = -1, copy_to = -1;
    int32_t copy_tokens = 0;
    size_t next_suffix = 0;
  };
  int64_t Slot(const std::vector<BlockId>& blocks, int64_t position) const;
  // Moves the tokens all of a group's suffixes begin with into its prefix.
  static void ExtendPrefix(Unit& unit, int64_t bs);
  void Start(Unit& unit);
  // Appends blocks to `unit.chain` until it covers `end` positions; false
  // (nothing appended) when the pool is full.
  bool Grow(Unit& unit, int64_t end);
  void Close(Unit& unit);  // its chain's references pass to the pass
  void Drop(Unit& unit);   // releases what it holds

  KvBlocks* const blocks_;
  const int32_t depth_;
  const int64_t budget_;
  std::vector<Unit> units_;
  size_t first_open_ = 0;
  // What the pass in flight holds and published.
  bool in_flight_ = false;
  std::vector<BlockId> pass_refs_;
  std::vector<BlockId> pass_published_;
  // Copy destinations of the pass in flight: their first positions are not
  // there before its copies run, so they are no copy's source.
  std::vector<BlockId> pass_copied_;
  PlanStats stats_;
};

}  // namespace mesa_anyjev::engine
