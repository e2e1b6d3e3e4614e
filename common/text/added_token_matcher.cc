// Added-token matching, following find_matches in Hugging Face tokenizers'
// added_vocabulary.rs (an Aho-Corasick LeftmostLongest scan there; a
// first-byte index here, enough for the few dozen added tokens checkpoints
// carry).
#include "common/text/added_token_matcher.h"

#include <algorithm>
#include <utility>

#include "common/text/utf8.h"
#include "utf8proc.h"

namespace mesa_anyjev::text {
namespace {

// Unicode White_Space, as Rust's regex \s.
bool IsWhiteSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Rust's regex \w: letters, marks, decimal and letter numbers, connector
// punctuation and the joiners.
bool IsWordChar(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  for (AddedToken& token : tokens) {
    if (!token.content.empty()) tokens_.push_back(std::move(token));
  }
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) {
                     return a.content.size() > b.content.size();
                   });
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto first = static_cast<unsigned char>(tokens_[i].content[0]);
    by_first_byte_[first].push_back(static_cast<int>(i));
  }
}

void AddedTokenMatcher::Split(std::string_view text,
                              std::vector<Segment>* segments) const {
  segments->clear();
  size_t done = 0;  // end of the last token match (start_offset upstream)
  size_t pos = 0;   // where the scan for the next match resumes
  while (pos < text.size()) {
    const std::vector<int>& candidates =
        by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (const int index : candidates) {
      const AddedToken& token = tokens_[index];
      if (text.compare(pos, token.content.size(), token.content) == 0) {
        hit = &token;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + hit->content.size();
    pos = stop;                  // matches never overlap, even a discarded one
    if (start < done) continue;  // inside an rstrip'ed stretch
    if (hit->single_word) {
      size_t before = start;
      size_t after = stop;
      const bool word_before =
          start > 0 && IsWordChar(PrevCodePoint(text, &before));
      const bool word_after =
          stop < text.size() && IsWordChar(NextCodePoint(text, &after));
      if (word_before || word_after) continue;
    }
    if (hit->lstrip) {
      size_t at = start;
      while (at > done) {
        size_t prev = at;
        if (!IsWhiteSpace(PrevCodePoint(text, &prev))) break;
        at = prev;
      }
      start = at;
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!IsWhiteSpace(NextCodePoint(text, &next))) break;
        stop = next;
      }
    }
    if (done < start) segments->push_back({done, start, -1});
    segments->push_back({start, stop, hit->id});
    done = stop;
  }
  if (done < text.size()) segments->push_back({done, text.size(), -1});
}

}  // namespace mesa_anyjev::text
