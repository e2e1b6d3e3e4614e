// AddedTokenMatcher: finds a tokenizer.json's added tokens in text before
// the model sees it, as Hugging Face tokenizers' AddedVocabulary does:
// leftmost-longest, non-overlapping matches, with each token's single_word,
// lstrip and rstrip flags.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/text/tokenizer.h"

namespace mesa_anyjev::text {

struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;  // only when no word character touches it
  bool lstrip = false;       // absorbs the whitespace on its left
  bool rstrip = false;       // absorbs the whitespace on its right
  bool normalized = false;   // matched in normalized text, not raw text
};

class AddedTokenMatcher {
 public:
  // One stretch of the input: an added token (id >= 0) or text (id -1).
  struct Segment {
    size_t begin = 0;
    size_t end = 0;
    TokenId id = -1;
  };

  // Matches `tokens` as they are spelled (a caller that matches normalized
  // text passes normalized spellings). Empty spellings never match.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Replaces `*segments` with the segments covering `text` (valid UTF-8),
  // in order; text segments are never empty.
  void Split(std::string_view text, std::vector<Segment>* segments) const;

 private:
  std::vector<AddedToken> tokens_;  // longest first, so the first hit wins
  // Tokens (indices into tokens_) by their first byte.
  std::array<std::vector<int>, 256> by_first_byte_;
};

}  // namespace mesa_anyjev::text
