// WordCache: a bounded, thread-safe map from a pre-tokenized word's bytes to
// its BPE ids. Words repeat heavily in text, so most words skip the merge
// loop. Sharded by hash so gRPC threads encoding at once rarely meet on a
// lock; a full shard is emptied, which bounds memory without LRU upkeep.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev::text {

class WordCache {
 public:
  // Words of this many bytes or more are never cached (Hugging Face's BPE
  // cache stops at 256 characters too).
  static constexpr size_t kMaxWordBytes = 256;

  // At most `capacity` words in all; 0 disables the cache.
  explicit WordCache(size_t capacity);

  // Appends the cached ids of `word` to `ids`; false when it is not cached.
  bool Lookup(std::string_view word, std::vector<TokenId>* ids) const;

  void Insert(std::string_view word, const TokenId* ids, size_t count) const;

 private:
  static constexpr size_t kShards = 16;
  using Ids = absl::InlinedVector<TokenId, 4>;
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, Ids> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(std::string_view word) const;

  size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace mesa_anyjev::text
