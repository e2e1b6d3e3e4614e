#include "server/engine/prefix_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace mesa_anyjev::engine {
namespace {

int64_t CommonPrefix(const std::vector<TokenId>& a,
                     const std::vector<TokenId>& b) {
  const auto end = std::mismatch(
      a.begin(), a.begin() + static_cast<int64_t>(std::min(a.size(), b.size())),
      b.begin());
  return static_cast<int64_t>(end.first - a.begin());
}

}  // namespace

PrefixCache::PrefixCache(int64_t capacity_bytes, EngineObserver* observer)
    : capacity_(capacity_bytes), observer_(observer) {}

std::optional<model::PrefixState> PrefixCache::Lookup(
    const std::vector<TokenId>& ids, int32_t depth) {
  auto best = entries_.end();
  int64_t best_length = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->state.depth < depth) continue;
    const int64_t length =
        std::min(CommonPrefix(it->ids, ids), it->state.length);
    if (length > best_length) {
      best = it;
      best_length = length;
    }
  }
  if (observer_ != nullptr)
    observer_->OnPrefixLookup(best_length > 0, best_length);
  if (best == entries_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  return best->state.Truncated(best_length);
}

void PrefixCache::Insert(const std::vector<TokenId>& ids,
                         model::PrefixState state) {
  const int64_t size = state.bytes();
  if (size > capacity_) return;
  // A state for the same ids (or a shallower one) is replaced.
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->ids == ids) {
      bytes_ -= it->bytes;
      entries_.erase(it);
      break;
    }
  }
  while (bytes_ + size > capacity_ && !entries_.empty()) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
    if (observer_ != nullptr) observer_->OnPrefixEviction();
  }
  entries_.push_front(Entry{ids, std::move(state), size});
  bytes_ += size;
  Report();
}

void PrefixCache::Report() const {
  if (observer_ != nullptr) observer_->OnPrefixCacheSize(bytes_, entries());
}

}  // namespace mesa_anyjev::engine
