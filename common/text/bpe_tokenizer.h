// BpeTokenizer: the byte-level BPE tokenizer of a Hugging Face tokenizer.json
// (Qwen2, Qwen2.5, Qwen3, GPT-2 style files), giving the ids that Hugging
// Face tokenizers gives for encode(text, add_special_tokens=False).
//
// Encode, in Hugging Face's order:
//   1. added tokens with normalized=false are matched in the raw text
//      (leftmost-longest; single_word, lstrip and rstrip honoured);
//   2. each stretch between them is normalized (NFC, or nothing), and added
//      tokens with normalized=true are matched in that;
//   3. each remaining stretch is split by the pre-tokenizer's regex
//      (Split behavior Isolated, or ByteLevel's GPT-2 regex);
//   4. each piece is BPE-merged over its bytes (byte-level alphabet).
// Special and non-special added tokens both match (as with
// add_special_tokens=False: that flag only adds BOS/EOS, which Qwen has none
// of); no special token is ever added.
//
// Decode: each id's bytes (ByteLevel decoder rules) concatenated, then made
// valid UTF-8 with U+FFFD for each ill-formed subsequence, as Hugging Face's
// decode(ids, skip_special_tokens=False) does. Specials are kept.
//
// Refused when loading, by name: normalizers other than NFC (alone or in a
// Sequence), pre-tokenizers other than ByteLevel or Sequence[Split, ByteLevel]
// (Split behaviors other than Isolated, invert, add_prefix_space=true),
// decoders other than ByteLevel, models other than BPE, byte_fallback,
// dropout, subword prefixes/suffixes, a vocabulary without the 256 byte
// symbols.
//
// Thread-safe: Encode and Decode are const and may run on many threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/text/added_token_matcher.h"
#include "common/text/bpe_model.h"
#include "common/text/regex_splitter.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev::text {

class BpeTokenizer : public Tokenizer {
 public:
  // Reads a tokenizer.json; `tokenizer_json_path` may also name the
  // directory holding one. Errors name the file and what is wrong.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromFile(
      const std::string& tokenizer_json_path);
  // The same from the file's text; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromJson(
      std::string_view json, const std::string& source);

  // Invalid UTF-8 is INVALID_ARGUMENT naming the byte offset.
  absl::StatusOr<std::vector<TokenId>> Encode(
      std::string_view text) const override;
  // An id outside [0, vocab_size) or without a token is INVALID_ARGUMENT.
  absl::StatusOr<std::string> Decode(
      absl::Span<const TokenId> ids) const override;
  // Ids the tokenizer knows: the largest id + 1 (151,669 for Qwen3, whose
  // model pads its embedding to 151,936).
  int32_t vocab_size() const override {
    return static_cast<int32_t>(id_bytes_.size());
  }

  // The id of a token by its spelling: an added token's content
  // ("<|im_start|>") or a vocabulary entry as tokenizer.json spells it
  // ("ĠYes" for " Yes"); -1 when there is none.
  TokenId TokenToId(std::string_view token) const;
  // The spelling of `id` (as TokenToId takes it); empty when unknown.
  std::string_view IdToToken(TokenId id) const;
  // True for an added token marked special ("<|im_end|>", not "<think>").
  bool IsSpecial(TokenId id) const;

  // Whether the split regex runs on PCRE2's JIT (false: the interpreter).
  bool regex_jit() const { return splitter_ == nullptr || splitter_->jit(); }

 private:
  BpeTokenizer() = default;

  // The id tables and added-token matchers, from the model's vocabulary
  // (spelling -> id) and the added tokens.
  absl::Status BuildTables(
      const absl::flat_hash_map<std::string, TokenId>& vocab,
      const std::vector<AddedToken>& added);

  // Steps 2-4 of Encode for one stretch between raw-matched added tokens.
  absl::Status EncodeStretch(std::string_view text,
                             std::vector<TokenId>* ids) const;
  // Steps 3-4: pre-tokenize and merge.
  absl::Status EncodeNormalized(std::string_view text,
                                std::vector<TokenId>* ids) const;

  bool nfc_ = false;
  std::unique_ptr<RegexSplitter> splitter_;  // null: one piece per stretch
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<AddedTokenMatcher> raw_matcher_;
  std::unique_ptr<AddedTokenMatcher> normalized_matcher_;

  absl::flat_hash_map<std::string, TokenId> token_ids_;  // spelling -> id
  std::vector<std::string> spellings_;                   // id -> spelling
  std::vector<std::string> id_bytes_;                    // id -> decoded bytes
  std::vector<bool> known_;                              // id has a token
  std::vector<bool> special_;
};

}  // namespace mesa_anyjev::text
