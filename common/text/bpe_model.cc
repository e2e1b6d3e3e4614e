// The BPE merge loop. Short words (almost all of them) use a flat array and
// a linear scan for the best pair: no allocation, cache-friendly. Long ones
// (a CJK sentence is one \p{L}+ word) use a min-heap of candidate merges
// over a linked list of symbols, O(n log n). Both merge the lowest rank
// first and the leftmost among equal ranks, so they agree.
#include "common/text/bpe_model.h"

#include <limits>
#include <queue>
#include <utility>

#include "absl/strings/string_view.h"

namespace mesa_anyjev::text {
namespace {

constexpr size_t kSmallWord = 64;
constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

}  // namespace

BpeModel::BpeModel(const std::array<TokenId, 256>& byte_ids,
                   absl::flat_hash_map<uint64_t, Merge> merges,
                   absl::flat_hash_map<std::string, TokenId> whole_words,
                   const Options& options)
    : byte_ids_(byte_ids),
      merges_(std::move(merges)),
      whole_words_(std::move(whole_words)),
      ignore_merges_(options.ignore_merges),
      cache_(options.cache_capacity) {}

const BpeModel::Merge* BpeModel::FindMerge(TokenId left, TokenId right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::EncodeWord(std::string_view word,
                          std::vector<TokenId>* ids) const {
  if (word.size() == 1) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    const auto it =
        whole_words_.find(absl::string_view(word.data(), word.size()));
    if (it != whole_words_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  if (cache_.Lookup(word, ids)) return;
  const size_t before = ids->size();
  if (word.size() <= kSmallWord) {
    MergeSmall(word, ids);
  } else {
    MergeLarge(word, ids);
  }
  cache_.Insert(word, ids->data() + before, ids->size() - before);
}

void BpeModel::MergeSmall(std::string_view word,
                          std::vector<TokenId>* ids) const {
  // symbols[i] and the merge of the pair (symbols[i], symbols[i + 1]).
  std::array<TokenId, kSmallWord> symbols;
  std::array<int32_t, kSmallWord> ranks;
  std::array<TokenId, kSmallWord> merged;
  if (word.size() > kSmallWord) {
    MergeLarge(word, ids);
    return;
  }
  size_t n = word.size();
  for (size_t i = 0; i < n; ++i) {
    symbols[i] = byte_ids_[static_cast<unsigned char>(word[i])];
  }
  auto pair = [&](size_t i) {
    const Merge* merge = FindMerge(symbols[i], symbols[i + 1]);
    ranks[i] = merge == nullptr ? kNoRank : merge->rank;
    merged[i] = merge == nullptr ? -1 : merge->merged;
  };
  for (size_t i = 0; i + 1 < n; ++i) pair(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoRank) break;
    symbols[best] = merged[best];
    // Drop symbol best + 1 and the pair that started at it.
    for (size_t i = best + 1; i + 1 < n; ++i) {
      symbols[i] = symbols[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) pair(best - 1);
    if (best + 1 < n) pair(best);
  }
  ids->insert(ids->end(), symbols.begin(), symbols.begin() + n);
}

void BpeModel::MergeLarge(std::string_view word,
                          std::vector<TokenId>* ids) const {
  struct Symbol {
    TokenId id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // the left symbol
    TokenId merged;
    // std::priority_queue is a max-heap: "less" means a later merge.
    bool operator<(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1,
                  i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate> queue(std::less<Candidate>(),
                                       std::move(storage));
  auto push = [&](int32_t left) {
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    if (const Merge* merge = FindMerge(symbols[left].id, symbols[right].id)) {
      queue.push({merge->rank, left, merge->merged});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    // Stale: the left symbol merged away, or its right neighbour changed
    // since this candidate was queued.
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* current = FindMerge(left.id, right.id);
    if (current == nullptr || current->merged != top.merged) continue;
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    ids->push_back(symbols[i].id);
}

}  // namespace mesa_anyjev::text
