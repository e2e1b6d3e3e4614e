#include "server/engine/pass_lease.h"

#include <algorithm>
#include <iterator>

namespace mesa_anyjev::engine {

void PassLease::Hold(std::vector<BlockRef>& blocks) {
  held_.insert(held_.end(), std::make_move_iterator(blocks.begin()),
               std::make_move_iterator(blocks.end()));
  blocks.clear();
}

void PassLease::Publish(BlockId parent, const TokenId* tokens, BlockId block,
                        int32_t layers) {
  if (blocks_->Publish(parent, tokens, block, layers)) {
    published_.push_back(block);
  }
}

std::optional<BlockRef> PassLease::CopyRun(KvBlocks::PartialMatch run) {
  // The run is held, so this allocation cannot evict it.
  std::optional<BlockRef> into = blocks_->Allocate();
  if (!into.has_value()) return std::nullopt;
  const int64_t bs = blocks_->block_tokens();
  for (int64_t t = 0; t < run.tokens; ++t) {
    copy_from_.push_back(int64_t{run.block.id()} * bs + t);
    copy_to_.push_back(int64_t{into->id()} * bs + t);
  }
  copy_destinations_.push_back(into->id());
  Hold(std::move(run.block));
  return into;
}

bool PassLease::CopiesInto(BlockId block) const {
  return std::find(copy_destinations_.begin(), copy_destinations_.end(),
                   block) != copy_destinations_.end();
}

void PassLease::Commit() { Release(); }

void PassLease::Abort() {
  // Out of the cache before the references go, so a block only this pass
  // held is freed with them.
  for (BlockId block : published_) blocks_->Unpublish(block);
  Release();
}

void PassLease::Release() {
  published_.clear();
  copy_destinations_.clear();
  copy_from_.clear();
  copy_to_.clear();
  held_.clear();
}

}  // namespace mesa_anyjev::engine
