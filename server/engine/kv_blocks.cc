#include "server/engine/kv_blocks.h"

#include <algorithm>

namespace mesa_anyjev::engine {

KvBlocks::KvBlocks(int32_t num_blocks, int32_t block_tokens,
                   bool prefix_caching)
    : block_tokens_(std::max(block_tokens, 1)),
      prefix_caching_(prefix_caching),
      blocks_(static_cast<size_t>(std::max(num_blocks, 0))) {
  // Lowest ids first, so a small workload touches the front of the pool.
  for (BlockId b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

BlockRef& BlockRef::operator=(BlockRef&& other) noexcept {
  if (this != &other) {
    Reset();
    blocks_ = std::exchange(other.blocks_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void BlockRef::Reset() {
  if (blocks_ != nullptr) std::exchange(blocks_, nullptr)->Unref(id_);
}

KvBlocks::LruKey KvBlocks::LruOf(BlockId b) const {
  const Block& block = blocks_[static_cast<size_t>(b)];
  return {block.last_use, {-block.ancestors, b}};
}

KvBlocks::Children& KvBlocks::ChildrenOf(BlockId parent) {
  return parent < 0 ? roots_ : blocks_[static_cast<size_t>(parent)].children;
}

void KvBlocks::Touch(BlockId b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  const bool evictable = block.cached && block.refs == 0;
  if (evictable) evictable_.erase(LruOf(b));
  block.last_use = clock_;
  if (evictable) evictable_.insert(LruOf(b));
}

void KvBlocks::Release(BlockId b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  block = Block();
  free_.push_back(b);
}

std::optional<BlockRef> KvBlocks::Allocate() {
  if (free_.empty()) {
    if (evictable_.empty()) return std::nullopt;
    // The oldest unreferenced block is a leaf: its children, if any, were
    // touched with it and sort before it.
    Detach(evictable_.begin()->second.second);
    ++evictions_;
  }
  const BlockId b = free_.back();
  free_.pop_back();
  blocks_[static_cast<size_t>(b)].refs = 1;
  ++referenced_;
  return BlockRef(this, b);
}

BlockRef KvBlocks::Share(BlockId b) {
  Ref(b);
  return BlockRef(this, b);
}

void KvBlocks::Ref(BlockId b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.refs == 0) {
    if (block.cached) evictable_.erase(LruOf(b));
    ++referenced_;
  }
  ++block.refs;
}

void KvBlocks::Unref(BlockId b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (--block.refs > 0) return;
  --referenced_;
  if (block.cached) {
    evictable_.insert(LruOf(b));
  } else {
    Release(b);
  }
}

std::vector<BlockRef> KvBlocks::Match(const std::vector<TokenId>& ids,
                                      size_t limit, int32_t layers) {
  std::vector<BlockRef> chain;
  if (!prefix_caching_) return chain;
  const size_t bs = static_cast<size_t>(block_tokens_);
  const size_t end = std::min(limit, ids.size());
  ++clock_;
  const Children* children = &roots_;
  for (size_t k = 0; (k + 1) * bs <= end; ++k) {
    const Key key(ids.begin() + static_cast<std::ptrdiff_t>(k * bs),
                  ids.begin() + static_cast<std::ptrdiff_t>((k + 1) * bs));
    const auto it = children->find(key);
    if (it == children->end()) break;
    const Block& block = blocks_[static_cast<size_t>(it->second)];
    if (block.layers < layers) break;
    Touch(it->second);
    chain.push_back(Share(it->second));
    children = &block.children;
  }
  return chain;
}

std::optional<KvBlocks::PartialMatch> KvBlocks::MatchPartial(
    BlockId parent, const TokenId* ids, int32_t n, int32_t layers,
    const std::function<bool(BlockId)>& usable) {
  if (!prefix_caching_ || parent < 0) return std::nullopt;
  std::optional<std::pair<BlockId, int32_t>> best;
  n = std::min(n, block_tokens_ - 1);
  for (const auto& [key, child] :
       blocks_[static_cast<size_t>(parent)].children) {
    if (blocks_[static_cast<size_t>(child)].layers < layers || !usable(child)) {
      continue;
    }
    const int32_t m = static_cast<int32_t>(
        std::mismatch(ids, ids + std::max(n, 0), key.begin()).first - ids);
    if (m > 0 && (!best.has_value() || m > best->second)) best = {child, m};
  }
  if (!best.has_value()) return std::nullopt;
  Touch(best->first);  // with its parent's clock
  return PartialMatch{Share(best->first), best->second};
}

bool KvBlocks::Publish(BlockId parent, const TokenId* tokens, BlockId b,
                       int32_t layers) {
  if (!prefix_caching_) return false;
  if (parent >= 0 && !blocks_[static_cast<size_t>(parent)].cached) {
    return false;  // its chain left the cache: nothing can reach it
  }
  Key key(tokens, tokens + block_tokens_);
  Children& children = ChildrenOf(parent);
  if (const auto it = children.find(key); it != children.end()) {
    if (it->second == b) return false;
    if (blocks_[static_cast<size_t>(it->second)].layers >= layers) {
      return false;
    }
    Detach(it->second);
  }
  Block& block = blocks_[static_cast<size_t>(b)];
  block.cached = true;
  block.parent = parent;
  block.ancestors =
      parent < 0 ? 0 : blocks_[static_cast<size_t>(parent)].ancestors + 1;
  block.layers = layers;
  block.tokens = key;
  block.last_use = ++clock_;
  ++cached_;
  ChildrenOf(parent).emplace(std::move(key), b);
  if (block.refs == 0) evictable_.insert(LruOf(b));
  return true;
}

void KvBlocks::Unpublish(BlockId b) {
  if (blocks_[static_cast<size_t>(b)].cached) Detach(b);
}

void KvBlocks::Detach(BlockId b) {
  // Children first (depth-first), each leaving its parent's map.
  std::vector<BlockId> order{b};
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& [key, child] :
         blocks_[static_cast<size_t>(order[i])].children) {
      order.push_back(child);
    }
  }
  ChildrenOf(blocks_[static_cast<size_t>(b)].parent)
      .erase(blocks_[static_cast<size_t>(b)].tokens);
  for (const BlockId id : order) {
    Block& block = blocks_[static_cast<size_t>(id)];
    block.children.clear();
    block.cached = false;
    --cached_;
    if (block.refs == 0) {
      evictable_.erase(LruOf(id));
      Release(id);
    }
  }
}

}  // namespace mesa_anyjev::engine
