// Keys and values of recent prompt prefixes, so questions about the same
// state reuse its computation. A lookup returns the entry sharing the
// longest common prefix with the new prompt, cut to that length: exact,
// because attention is causal (position t depends only on tokens <= t).
// Bounded in bytes, least recently used evicted first. Engine thread only.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "common/backend.h"
#include "server/engine/engine_observer.h"
#include "server/model/qwen3_model.h"

namespace mesa_anyjev::engine {

class PrefixCache {
 public:
  PrefixCache(int64_t capacity_bytes, EngineObserver* observer);

  // The longest cached prefix of `ids` (at least one token) whose state
  // covers `depth` blocks, as a state of that length; nullopt on a miss.
  std::optional<model::PrefixState> Lookup(const std::vector<TokenId>& ids,
                                           int32_t depth);
  // Keeps `state` for `ids`, evicting the least recently used entries; a
  // state larger than the whole capacity is not kept.
  void Insert(const std::vector<TokenId>& ids, model::PrefixState state);

  int64_t bytes() const { return bytes_; }
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    std::vector<TokenId> ids;
    model::PrefixState state;
    int64_t bytes = 0;
  };
  void Report() const;

  const int64_t capacity_;
  EngineObserver* const observer_;
  std::list<Entry> entries_;  // most recently used first
  int64_t bytes_ = 0;
};

}  // namespace mesa_anyjev::engine
