// What one planned pass holds in the KV pool until it has run: references
// to the blocks it attends to or copies from, the blocks it made findable
// in the prefix cache, and the copies of cached runs it makes. Settled once:
// Commit when the pass ran (its cache entries stand), Abort when it failed
// (they are withdrawn, since their keys and values were never computed); a
// lease destroyed unsettled aborts. Either way every reference goes, so a
// failed or abandoned pass can neither leak a block nor release one twice.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "server/engine/kv_blocks.h"

namespace mesa_anyjev::engine {

class PassLease {
 public:
  explicit PassLease(KvBlocks* blocks) : blocks_(blocks) {}
  ~PassLease() { Abort(); }
  PassLease(const PassLease&) = delete;
  PassLease& operator=(const PassLease&) = delete;

  // Held until the pass is settled.
  void Hold(BlockRef block) { held_.push_back(std::move(block)); }
  void Hold(std::vector<BlockRef>& blocks);  // takes them all
  // KvBlocks::Publish, withdrawn if the pass fails.
  void Publish(BlockId parent, const TokenId* tokens, BlockId block,
               int32_t layers);
  // A cached block's first positions that continue a prompt
  // (KvBlocks::MatchPartial), copied in this pass into a fresh block instead
  // of computed again: the fresh block, for the prompt's chain (nullopt,
  // nothing recorded, when the pool has none). The source is held until the
  // pass is settled.
  std::optional<BlockRef> CopyRun(KvBlocks::PartialMatch run);
  // Whether `block` receives a copy in this pass: its first positions are
  // not there until the copies run, so it is no copy's source in the pass.
  bool CopiesInto(BlockId block) const;
  // The pass's copies as pool slots, copy_from()[i] to copy_to()[i]: applied
  // at every layer after the pass's own keys and values are written.
  const std::vector<int64_t>& copy_from() const { return copy_from_; }
  const std::vector<int64_t>& copy_to() const { return copy_to_; }

  void Commit();
  void Abort();

 private:
  void Release();  // every reference, nothing more to withdraw

  KvBlocks* const blocks_;
  std::vector<BlockRef> held_;
  std::vector<BlockId> published_;
  std::vector<BlockId> copy_destinations_;
  std::vector<int64_t> copy_from_, copy_to_;
};

}  // namespace mesa_anyjev::engine
