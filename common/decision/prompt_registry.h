// The prompts one backend call reads, each distinct rendered prompt once (the
// package scores each distinct prompt once per call): a prompt's index is
// its row in the call's result. `owner` is the index of the state a prompt
// renders (-1 for a content-free probe), the first one's where states
// repeat: a refusal of the prompt names that state.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev::decision {

class PromptRegistry {
 public:
  // The row of `parts` read at `ids`; a prompt already added keeps its row.
  size_t Add(text::ChatParts parts, std::vector<text::TokenId> ids,
             int owner = -1) {
    std::string whole = absl::StrCat(parts.prefix, parts.suffix);
    const auto [it, inserted] = index_.try_emplace(whole, parts_.size());
    if (inserted) {
      parts_.push_back(std::move(parts));
      ids_.push_back(std::move(ids));
      texts_.push_back(std::move(whole));
      owners_.push_back(owner);
    }
    return it->second;
  }
  bool empty() const { return parts_.empty(); }
  const std::vector<text::ChatParts>& parts() const { return parts_; }
  const std::vector<std::vector<text::TokenId>>& ids() const { return ids_; }
  const std::vector<int>& owners() const { return owners_; }
  const std::string& text(size_t row) const { return texts_[row]; }

 private:
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<text::ChatParts> parts_;
  std::vector<std::vector<text::TokenId>> ids_;
  std::vector<std::string> texts_;
  std::vector<int> owners_;
};

}  // namespace mesa_anyjev::decision
