// PCRE2 with JIT for the pre-tokenizer split: the Qwen2 regex compiles with
// PCRE2_UTF | PCRE2_UCP and JIT-compiles, and std::regex has no \p classes.
#include "common/text/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::text {
namespace {

// Split needs only the whole match; a pattern with groups still reports it
// (pcre2_match returns 0: "ovector too small").
constexpr uint32_t kOvectorPairs = 4;
constexpr size_t kJitStackStart = 32 * 1024;
constexpr size_t kJitStackMax = 8 * 1024 * 1024;

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return absl::StrCat("PCRE2 error ", code);
  return std::string(reinterpret_cast<const char*>(buffer), n);
}

// One per thread, shared by every pattern: match data and a JIT stack are
// not tied to a pattern, and no thread ever waits for another.
class MatchState {
 public:
  MatchState()
      : data_(pcre2_match_data_create(kOvectorPairs, nullptr)),
        context_(pcre2_match_context_create(nullptr)),
        stack_(pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr)) {
    if (context_ != nullptr && stack_ != nullptr) {
      pcre2_jit_stack_assign(context_, nullptr, stack_);
    }
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack_);
    pcre2_match_context_free(context_);
    pcre2_match_data_free(data_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  bool ok() const {
    return data_ != nullptr && context_ != nullptr && stack_ != nullptr;
  }
  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* stack_;
};

size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(
    std::string_view pattern, bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options =
      PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                    pattern.size(), options, &error, &offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("split regex does not compile at offset ", offset, ": ",
                     Pcre2Message(error)));
  }
  // Without JIT (a platform PCRE2 lacks it for) the interpreter gives the
  // same matches, only slower.
  const bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::unique_ptr<RegexSplitter>(new RegexSplitter(code, jit));
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(code_); }

absl::Status RegexSplitter::Split(std::string_view text,
                                  std::vector<std::string_view>* pieces) const {
  thread_local MatchState state;
  if (!state.ok()) {
    return absl::ResourceExhaustedError("cannot allocate PCRE2 match data");
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t length = text.size();
  size_t start = 0;
  size_t gap = 0;  // start of the text not yet in a piece
  while (start < length) {
    // The text was validated once by the caller: skip PCRE2's UTF check.
    const int rc =
        jit_ ? pcre2_jit_match(code_, subject, length, start, 0, state.data(),
                               state.context())
             : pcre2_match(code_, subject, length, start, PCRE2_NO_UTF_CHECK,
                           state.data(), state.context());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "split regex failed at byte ", start, ": ", Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data());
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end <= begin || begin < gap) {
      // An empty match (or a \K oddity) splits nothing: retry one
      // character further on, leaving the character in the gap.
      const size_t from = begin < start ? start : begin;
      if (from >= length) break;
      start = from + Utf8Length(static_cast<unsigned char>(text[from]));
      continue;
    }
    if (begin > gap) pieces->push_back(text.substr(gap, begin - gap));
    pieces->push_back(text.substr(begin, end - begin));
    gap = start = end;
  }
  if (gap < length) pieces->push_back(text.substr(gap));
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::text
