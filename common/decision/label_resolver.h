// Answer labels and their token ids (docs/decision.md, Labels; anyjev
// readout.resolve_labels): A..Z for choice, 1..K for score, Yes/No for noul.
// Each label is tried bare, then with a leading space, and must be exactly
// one token with no two labels on the same id; a score whose digits are not
// single tokens falls back to letters. The logprob read at position j is
// then "the option shown at position j" (choice, score) or "the option the
// label names" (noul).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/question.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev::decision {

struct ResolvedLabels {
  std::vector<std::string> labels;  // shown in the prompt, position order
  std::vector<text::TokenId> ids;   // one token each, aligned with labels
};

// The labels a question asks for before any tokenizer is consulted: its
// custom labels, else A.. / 1.. / Yes, No.
std::vector<std::string> AnswerLabels(const Question& question);

// One token id per label: the bare string if it encodes to one token, else
// " " + label; INVALID_ARGUMENT naming the label (and what it encodes to)
// when neither does, or naming both labels when two share an id.
absl::StatusOr<std::vector<text::TokenId>> MapLabelTokens(
    const text::Tokenizer& tokenizer, const std::vector<std::string>& labels);

// AnswerLabels mapped to ids, with the score fallback to letters.
absl::StatusOr<ResolvedLabels> ResolveLabels(const text::Tokenizer& tokenizer,
                                             const Question& question);

// Ids in position order for one permutation: the same list for positional
// labels, ids[perm[j]] for noul so Yes stays bound to the Yes option.
std::vector<text::TokenId> LabelIdsForPerm(
    const Question& question, const std::vector<text::TokenId>& ids,
    const std::vector<int>& perm);

}  // namespace mesa_anyjev::decision
