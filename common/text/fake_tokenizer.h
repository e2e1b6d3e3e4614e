// The fake model's tokenizer: reversible byte-level ids plus the special and
// label tokens the decision code needs to be single tokens.
//
// Id layout (vocab_size() = 335):
//   0..255    one token per byte value (any text round-trips exactly)
//   256       <|endoftext|>
//   257       <|im_start|>
//   258       <|im_end|>
//   259..296  bare labels "A".."Z", "0".."9", "Yes", "No" (in that order)
//   297..334  the same labels with a leading space: " A", ..., " No"
//
// Encoding scans left to right: a special token wherever its text occurs;
// else the longest label token that starts here and is not followed by an
// ASCII letter or digit ("A." and " Yes" are labels, "Answer" is bytes);
// else one byte token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/text/tokenizer.h"
#include "common/text/utf8.h"  // FirstInvalidUtf8, used by callers too

namespace mesa_anyjev::text {

class FakeTokenizer : public Tokenizer {
 public:
  static constexpr TokenId kNumByteTokens = 256;
  static constexpr TokenId kEndOfTextId = 256;
  static constexpr TokenId kImStartId = 257;
  static constexpr TokenId kImEndId = 258;
  static constexpr TokenId kFirstLabelId = 259;
  static constexpr int kNumLabels = 38;  // 26 letters, 10 digits, Yes, No
  static constexpr TokenId kVocabSize = kFirstLabelId + 2 * kNumLabels;

  FakeTokenizer();

  absl::StatusOr<std::vector<TokenId>> Encode(
      std::string_view text) const override;
  absl::StatusOr<std::string> Decode(
      absl::Span<const TokenId> ids) const override;
  int32_t vocab_size() const override { return kVocabSize; }

  // Id of the label token spelled exactly `label` ("A", " A", "Yes", " 7"),
  // or -1 when there is none.
  TokenId LabelId(std::string_view label) const;

  // Text of a single id (a byte, a special or a label); `id` must be in
  // [0, vocab_size).
  std::string_view TokenText(TokenId id) const;

  // The special tokens' texts, in id order.
  static constexpr std::array<std::string_view, 3> kSpecials = {
      "<|endoftext|>", "<|im_start|>", "<|im_end|>"};

 private:
  // Texts of every id; bytes are one-character strings.
  std::vector<std::string> texts_;
};

}  // namespace mesa_anyjev::text
