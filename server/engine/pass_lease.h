// What one planned pass holds in the KV pool until it has run: references
// to the blocks it attends to or copies from, the blocks it made findable
// in the prefix cache, and its copy destinations. Settled once: Commit when
// the pass ran (its cache entries stand), Abort when it failed (they are
// withdrawn, since their keys and values were never computed); a lease
// destroyed unsettled aborts. Either way every reference goes, so a failed
// or abandoned pass can neither leak a block nor release one twice.
#pragma once

#include <cstdint>
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
  // `block` receives a copy in this pass: its first positions are not there
  // until the copies run, so it is no copy's source in the same pass.
  void CopyInto(BlockId block) { copy_destinations_.push_back(block); }
  bool CopiesInto(BlockId block) const;

  void Commit();
  void Abort();

 private:
  void Release();  // every reference, nothing more to withdraw

  KvBlocks* const blocks_;
  std::vector<BlockRef> held_;
  std::vector<BlockId> published_;
  std::vector<BlockId> copy_destinations_;
};

}  // namespace mesa_anyjev::engine
