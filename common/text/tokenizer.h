// The Tokenizer seam: what the decision code and the daemon need from a
// tokenizer. Implementations: the fake model's tokenizer, byte-level BPE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mesa_anyjev::text {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ids of `text` (UTF-8) with no special tokens added. Invalid UTF-8 is
  // INVALID_ARGUMENT naming the byte offset.
  virtual absl::StatusOr<std::vector<TokenId>> Encode(
      std::string_view text) const = 0;

  // Text of `ids`; an id outside [0, vocab_size) is INVALID_ARGUMENT.
  virtual absl::StatusOr<std::string> Decode(
      absl::Span<const TokenId> ids) const = 0;

  // Number of ids the tokenizer knows (largest id + 1). A model's output
  // layer may be wider: Qwen3's tokenizer knows 151,669, its embedding has
  // 151,936 rows.
  virtual int32_t vocab_size() const = 0;
};

}  // namespace mesa_anyjev::text
