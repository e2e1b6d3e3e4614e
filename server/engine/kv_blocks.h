// The KV pool's bookkeeping, without tensors: fixed-size KV blocks of
// `block_tokens` positions, reference counts, and the prefix cache as a
// radix tree over full blocks (a node per block, children keyed by the
// block's tokens), so any shared prefix is found to the block, across calls.
// A block's keys and values are those of its whole token path from the root
// (attention is causal), so a node is exact for every prompt that starts
// with that path. Only unreferenced blocks are evicted, least recently used
// first; a user holds a reference on every block it attends to, so the
// victim is always a leaf. References are held through BlockRef handles
// (released when the handle goes), so no caller counts them by hand.
// Engine thread only: no locks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev::engine {

using BlockId = int32_t;
using text::TokenId;

class KvBlocks;

// One reference to one block: moved, never copied; released when it goes.
class BlockRef {
 public:
  BlockRef() = default;
  BlockRef(BlockRef&& other) noexcept
      : blocks_(std::exchange(other.blocks_, nullptr)), id_(other.id_) {}
  BlockRef& operator=(BlockRef&& other) noexcept;
  BlockRef(const BlockRef&) = delete;
  BlockRef& operator=(const BlockRef&) = delete;
  ~BlockRef() { Reset(); }

  BlockId id() const { return id_; }
  void Reset();

 private:
  friend class KvBlocks;
  BlockRef(KvBlocks* blocks, BlockId id) : blocks_(blocks), id_(id) {}
  KvBlocks* blocks_ = nullptr;  // null: holds nothing
  BlockId id_ = -1;
};

class KvBlocks {
 public:
  KvBlocks(int32_t num_blocks, int32_t block_tokens, bool prefix_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_tokens() const { return block_tokens_; }
  // Blocks held by a reference (a pass or a call in flight).
  int32_t referenced() const { return referenced_; }
  // Blocks in the prefix cache (referenced or not).
  int32_t cached() const { return cached_; }
  int64_t evictions() const { return evictions_; }

  // A free block, else the least recently used unreferenced cached block,
  // evicted; nullopt when every block is held.
  std::optional<BlockRef> Allocate();
  // Another reference to a block already held or cached.
  BlockRef Share(BlockId block);

  // The longest chain of cached blocks spelling `ids[0, k * block_tokens)`
  // whose keys and values cover `layers` transformer layers, with
  // k * block_tokens <= `limit`; referenced, and marked used.
  std::vector<BlockRef> Match(const std::vector<TokenId>& ids, size_t limit,
                              int32_t layers);

  // A cached block whose first `tokens` positions continue a prompt.
  struct PartialMatch {
    BlockRef block;
    int32_t tokens = 0;
  };
  // Past a matched chain: the cached child of `parent` (a chain's last
  // block, never the root, whose children are every prompt's first block)
  // covering `layers`, admitted by `usable`, whose tokens begin with the
  // longest run of `ids[0, n)`, n < block_tokens; nullopt when none matches
  // a token. Its first positions' keys and values are those of the run
  // (same path, same positions), so they can be copied instead of
  // computed. Referenced (an allocation cannot evict it), marked used.
  std::optional<PartialMatch> MatchPartial(
      BlockId parent, const TokenId* ids, int32_t n, int32_t layers,
      const std::function<bool(BlockId)>& usable);

  // Makes `block`, holding `tokens` (block_tokens of them) after the chain
  // ending at `parent` (-1: the root) with keys and values for `layers`
  // transformer layers, findable. A cached node for the same path that
  // covers `layers` wins and `block` stays private (false); a shallower one
  // is replaced, its subtree leaving the cache. References are unchanged.
  bool Publish(BlockId parent, const TokenId* tokens, BlockId block,
               int32_t layers);
  // Removes `block` and its subtree from the cache (their keys and values
  // were not computed after all); held blocks stay until unreferenced.
  void Unpublish(BlockId block);

 private:
  friend class BlockRef;
  void Ref(BlockId block);
  // The last reference to a block outside the cache frees it.
  void Unref(BlockId block);

  using Key = std::vector<TokenId>;
  using Children = absl::flat_hash_map<Key, BlockId>;
  struct Block {
    int32_t refs = 0;
    bool cached = false;
    BlockId parent = -1;
    int32_t ancestors = 0;  // blocks before it in its chain
    int32_t layers = 0;     // transformer layers its keys and values cover
    Key tokens;
    Children children;
    uint64_t last_use = 0;
  };
  // Eviction order among unreferenced cached blocks: oldest first, later
  // in its chain first on a tie (a parent is touched whenever its child is).
  using LruKey = std::pair<uint64_t, std::pair<int32_t, BlockId>>;
  LruKey LruOf(BlockId b) const;
  Children& ChildrenOf(BlockId parent);
  void Touch(BlockId b);
  void Release(BlockId b);  // back to the free list
  void Detach(BlockId b);   // out of the cache with its subtree

  const int32_t block_tokens_;
  const bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_;
  Children roots_;
  std::set<LruKey> evictable_;
  uint64_t clock_ = 0;
  int32_t referenced_ = 0;
  int32_t cached_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace mesa_anyjev::engine
