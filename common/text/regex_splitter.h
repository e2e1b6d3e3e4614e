// RegexSplitter: the Split pre-tokenizer with behavior "Isolated" (every
// match is a piece and so is every gap between matches), on PCRE2 with its
// JIT. Thread-safe: the compiled pattern is shared and read-only; match data
// and the JIT stack are per thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct pcre2_real_code_8;  // pcre2.h's pcre2_code, kept out of this header

namespace mesa_anyjev::text {

class RegexSplitter {
 public:
  // `pattern` compiles with PCRE2_UTF | PCRE2_UCP (\s, \p{L}, \w are
  // Unicode-aware, as in Oniguruma, which Hugging Face tokenizers uses);
  // `literal` matches it as a plain string instead. INVALID_ARGUMENT names
  // the offset of a pattern PCRE2 rejects.
  static absl::StatusOr<std::unique_ptr<RegexSplitter>> Create(
      std::string_view pattern, bool literal);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` (valid UTF-8) to `pieces` in order: each
  // non-empty match and each non-empty gap between matches. Fails only when
  // PCRE2 does (out of memory, JIT stack limit).
  absl::Status Split(std::string_view text,
                     std::vector<std::string_view>* pieces) const;

  bool jit() const { return jit_; }

 private:
  RegexSplitter(pcre2_real_code_8* code, bool jit) : code_(code), jit_(jit) {}

  pcre2_real_code_8* code_;
  bool jit_;
};

}  // namespace mesa_anyjev::text
