// Label resolution (see label_resolver.h).
#include "common/decision/label_resolver.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {
namespace {

std::vector<std::string> Letters(int k) {
  std::vector<std::string> out;
  for (int i = 0; i < k; ++i) out.emplace_back(1, static_cast<char>('A' + i));
  return out;
}

}  // namespace

std::vector<std::string> AnswerLabels(const Question& question) {
  if (!question.custom_labels().empty()) return question.custom_labels();
  switch (question.kind()) {
    case QuestionKind::kNoul:
      return {"Yes", "No"};
    case QuestionKind::kScore: {
      std::vector<std::string> out;
      for (int i = 0; i < question.k(); ++i) out.push_back(absl::StrCat(i + 1));
      return out;
    }
    case QuestionKind::kChoice:
      break;
  }
  return Letters(question.k());
}

absl::StatusOr<std::vector<text::TokenId>> MapLabelTokens(
    const text::Tokenizer& tokenizer, const std::vector<std::string>& labels) {
  std::vector<text::TokenId> ids;
  for (const std::string& label : labels) {
    bool found = false;
    for (const std::string& candidate : {label, absl::StrCat(" ", label)}) {
      ASSIGN_OR_RETURN(const std::vector<text::TokenId> tokens,
                       tokenizer.Encode(candidate));
      if (tokens.size() == 1) {
        ids.push_back(tokens[0]);
        found = true;
        break;
      }
    }
    if (!found) {
      ASSIGN_OR_RETURN(const std::vector<text::TokenId> tokens,
                       tokenizer.Encode(label));
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", PyJsonString(label),
          " is not a single token for this tokenizer, bare or with a "
          "leading space; it encodes to [",
          absl::StrJoin(tokens, ", "), "]"));
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (ids[i] == ids[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "labels ", PyJsonString(labels[j]), " and ",
            PyJsonString(labels[i]), " collide on token id ", ids[i]));
      }
    }
  }
  return ids;
}

absl::StatusOr<ResolvedLabels> ResolveLabels(const text::Tokenizer& tokenizer,
                                             const Question& question) {
  ResolvedLabels out;
  out.labels = AnswerLabels(question);
  auto ids = MapLabelTokens(tokenizer, out.labels);
  if (ids.ok()) {
    out.ids = *std::move(ids);
    return out;
  }
  if (question.kind() != QuestionKind::kScore ||
      !question.custom_labels().empty() ||
      !absl::IsInvalidArgument(ids.status())) {
    return ids.status();
  }
  out.labels = Letters(question.k());
  ASSIGN_OR_RETURN(out.ids, MapLabelTokens(tokenizer, out.labels));
  return out;
}

std::vector<text::TokenId> LabelIdsForPerm(
    const Question& question, const std::vector<text::TokenId>& ids,
    const std::vector<int>& perm) {
  if (question.kind() != QuestionKind::kNoul) return ids;
  std::vector<text::TokenId> out;
  for (int i : perm) out.push_back(ids[i]);
  return out;
}

}  // namespace mesa_anyjev::decision
