// FakeTokenizer: a tiny deterministic vocabulary in which every label the
// decision method uses is one token, and every byte string round-trips.
#include "common/text/fake_tokenizer.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::text {
namespace {

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

// Label strings in id order (the bare block; the spaced block repeats it).
std::vector<std::string> LabelStrings() {
  std::vector<std::string> labels;
  for (char c = 'A'; c <= 'Z'; ++c) {
    labels.emplace_back(1, c);
  }
  for (char c = '0'; c <= '9'; ++c) {
    labels.emplace_back(1, c);
  }
  labels.emplace_back("Yes");
  labels.emplace_back("No");
  return labels;
}

}  // namespace

FakeTokenizer::FakeTokenizer() {
  texts_.reserve(kVocabSize);
  for (int b = 0; b < kNumByteTokens; ++b) {
    texts_.emplace_back(1, static_cast<char>(b));
  }
  for (std::string_view special : kSpecials) {
    texts_.emplace_back(special);
  }
  const std::vector<std::string> labels = LabelStrings();
  for (const std::string& label : labels) {
    texts_.push_back(label);
  }
  for (const std::string& label : labels) {
    texts_.push_back(absl::StrCat(" ", label));
  }
}

absl::StatusOr<std::vector<TokenId>> FakeTokenizer::Encode(
    std::string_view text) const {
  if (const int64_t bad = FirstInvalidUtf8(text); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("text is not valid UTF-8 at byte offset ", bad));
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const std::string_view rest = text.substr(i);
    TokenId match = -1;
    size_t match_len = 0;
    for (TokenId id = kEndOfTextId; id <= kImEndId; ++id) {
      if (rest.substr(0, texts_[id].size()) == texts_[id]) {
        match = id;
        match_len = texts_[id].size();
        break;
      }
    }
    if (match < 0) {
      for (TokenId id = kFirstLabelId; id < kVocabSize; ++id) {
        const std::string& label = texts_[id];
        if (label.size() <= match_len ||
            rest.substr(0, label.size()) != label) {
          continue;
        }
        // "Answer" must not become "A" + "nswer": a label ends a word.
        if (label.size() < rest.size() && IsAsciiAlnum(rest[label.size()])) {
          continue;
        }
        match = id;
        match_len = label.size();
      }
    }
    if (match < 0) {
      match = static_cast<unsigned char>(rest[0]);
      match_len = 1;
    }
    ids.push_back(match);
    i += match_len;
  }
  return ids;
}

absl::StatusOr<std::string> FakeTokenizer::Decode(
    absl::Span<const TokenId> ids) const {
  std::string text;
  for (const TokenId id : ids) {
    if (id < 0 || id >= kVocabSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is outside [0, ", kVocabSize,
          ") of the fake tokenizer (vocab_size=", kVocabSize, ")"));
    }
    text += texts_[id];
  }
  return text;
}

TokenId FakeTokenizer::LabelId(std::string_view label) const {
  for (TokenId id = kFirstLabelId; id < kVocabSize; ++id) {
    if (texts_[id] == label) {
      return id;
    }
  }
  return -1;
}

std::string_view FakeTokenizer::TokenText(TokenId id) const {
  return texts_[id];
}

}  // namespace mesa_anyjev::text
