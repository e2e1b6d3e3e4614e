// WordCache (see word_cache.h).
#include "common/text/word_cache.h"

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace mesa_anyjev::text {
namespace {

// Debian's Abseil has its own string_view type.
absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace

WordCache::WordCache(size_t capacity)
    : per_shard_((capacity + kShards - 1) / kShards) {}

WordCache::Shard& WordCache::ShardFor(std::string_view word) const {
  // The high bits: flat_hash_map uses the low ones inside each shard.
  const size_t hash = absl::Hash<absl::string_view>{}(AbslView(word));
  return shards_[(hash >> 40) % kShards];
}

bool WordCache::Lookup(std::string_view word, std::vector<TokenId>* ids) const {
  if (per_shard_ == 0 || word.size() >= kMaxWordBytes) return false;
  Shard& shard = ShardFor(word);
  absl::MutexLock lock(&shard.mu);
  const auto it = shard.map.find(AbslView(word));
  if (it == shard.map.end()) return false;
  ids->insert(ids->end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::Insert(std::string_view word, const TokenId* ids,
                       size_t count) const {
  if (per_shard_ == 0 || word.size() >= kMaxWordBytes) return;
  Shard& shard = ShardFor(word);
  absl::MutexLock lock(&shard.mu);
  if (shard.map.size() >= per_shard_) shard.map.clear();
  shard.map.try_emplace(std::string(word), ids, ids + count);
}

}  // namespace mesa_anyjev::text
