// BpeModel: byte-level BPE over ids. A word's bytes start as one symbol
// each (the vocabulary id of the byte's alphabet character); the adjacent
// pair with the lowest merge rank merges first, the leftmost on ties, until
// no pair has a merge, as Hugging Face tokenizers' BPE::merge_word does.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/text/tokenizer.h"
#include "common/text/word_cache.h"

namespace mesa_anyjev::text {

class BpeModel {
 public:
  struct Merge {
    int32_t rank = 0;
    TokenId merged = 0;
  };
  struct Options {
    // Words in the vocabulary as a whole skip the merges (ignore_merges).
    bool ignore_merges = false;
    size_t cache_capacity = 1 << 18;
  };

  // `byte_ids[b]`: the id of byte b's single-character token. `merges`:
  // keyed by PairKey(left, right). `whole_words` (raw bytes -> id) is only
  // read with ignore_merges.
  BpeModel(const std::array<TokenId, 256>& byte_ids,
           absl::flat_hash_map<uint64_t, Merge> merges,
           absl::flat_hash_map<std::string, TokenId> whole_words,
           const Options& options);

  static uint64_t PairKey(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // Appends the ids of one pre-tokenized word (raw bytes, not empty).
  // Thread-safe.
  void EncodeWord(std::string_view word, std::vector<TokenId>* ids) const;

  // The merge loops without the cache, for tests: the quadratic one small
  // words use and the heap one long words use must agree.
  void MergeSmall(std::string_view word, std::vector<TokenId>* ids) const;
  void MergeLarge(std::string_view word, std::vector<TokenId>* ids) const;

 private:
  const Merge* FindMerge(TokenId left, TokenId right) const;

  std::array<TokenId, 256> byte_ids_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  absl::flat_hash_map<std::string, TokenId> whole_words_;
  bool ignore_merges_;
  WordCache cache_;
};

}  // namespace mesa_anyjev::text
