// Readout prompts (see prompt_builder.h).
#include "common/decision/prompt_builder.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_format.h"

namespace mesa_anyjev::decision {

PromptSpec BuildPrompt(std::string_view state_text, const Question& question,
                       const std::vector<int>& perm, std::string_view system,
                       const std::vector<std::string>& labels) {
  std::vector<std::string> prefix = {
      "State:", state_text.empty() ? "(empty)" : std::string(state_text), "",
      absl::StrCat("Question: ", question.text())};
  std::vector<std::string> suffix;
  switch (question.kind()) {
    case QuestionKind::kNoul:
      // The perm orders the phrasing only; Yes and No stay bound to their
      // options.
      suffix.push_back(absl::StrCat("Answer ", labels[perm[0]], " or ",
                                    labels[perm[1]], "."));
      break;
    case QuestionKind::kScore: {
      if (question.centers().has_value()) {
        prefix.push_back(
            "Pick the level that applies (the levels are ordered):");
      } else {
        prefix.push_back(absl::StrCat(
            "Answer on a scale from ", PyFormatG(question.scale_lo()), " to ",
            PyFormatG(question.scale_hi()), " by picking the closest bin:"));
      }
      for (size_t j = 0; j < perm.size(); ++j) {
        suffix.push_back(
            absl::StrCat(labels[j], ". ", question.options()[perm[j]]));
      }
      // str.isdigit() of the first label: digits say "number", letters (the
      // fallback) say "letter".
      const std::string& first = labels[0];
      const bool digits =
          !first.empty() && std::all_of(first.begin(), first.end(), [](char c) {
            return c >= '0' && c <= '9';
          });
      suffix.push_back(digits ? "Answer with the number only."
                              : "Answer with the letter only.");
      break;
    }
    case QuestionKind::kChoice:
      prefix.push_back("Options:");
      for (size_t j = 0; j < perm.size(); ++j) {
        suffix.push_back(
            absl::StrCat(labels[j], ". ", question.options()[perm[j]]));
      }
      suffix.push_back("Answer with the letter only.");
      break;
  }
  PromptSpec spec;
  spec.system = std::string(system);
  const std::string user_prefix =
      absl::StrCat(absl::StrJoin(prefix, "\n"), "\n");
  spec.split = user_prefix.size();
  spec.user = absl::StrCat(user_prefix, absl::StrJoin(suffix, "\n"));
  return spec;
}

text::ChatParts RenderPromptParts(const text::ChatTemplate& chat_template,
                                  const PromptSpec& spec) {
  const std::string marked = absl::StrCat(spec.user.substr(0, spec.split),
                                          std::string(text::kSplitSentinel),
                                          spec.user.substr(spec.split));
  const std::string rendered = chat_template.Render(spec.system, marked);
  const size_t at = rendered.find(text::kSplitSentinel);
  if (at == std::string::npos ||
      rendered.find(text::kSplitSentinel, at + text::kSplitSentinel.size()) !=
          std::string::npos) {
    return {chat_template.Render(spec.system, spec.user), ""};
  }
  return {rendered.substr(0, at),
          rendered.substr(at + text::kSplitSentinel.size())};
}

}  // namespace mesa_anyjev::decision
