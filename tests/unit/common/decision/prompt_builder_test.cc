// Prompts (docs/decision.md, Prompts): the system line, the user template of
// each kind, "(empty)", permuted option lines, the Qwen3 and fallback
// renders, and the prefix/suffix cut.
#include "common/decision/prompt_builder.h"

#include <catch2/catch.hpp>

#include "common/decision/label_resolver.h"

namespace mesa_anyjev::decision {
namespace {

std::string User(const std::string& state, const Question& q,
                 const std::vector<int>& perm) {
  return BuildPrompt(state, q, perm, kDefaultSystem, AnswerLabels(q)).user;
}

TEST_CASE("system line", "[decision]") {
  CHECK(kDefaultSystem ==
        "You are a decision function. You will be given a state and one "
        "question. Reply with the answer label only: no words, no "
        "punctuation, no explanation.");
}

TEST_CASE("noul user text and phrasing swap", "[decision]") {
  const Question q = Question::Noul("Is the sky blue?");
  CHECK(User("The sky is blue today.", q, {0, 1}) ==
        "State:\nThe sky is blue today.\n\nQuestion: Is the sky blue?\n"
        "Answer Yes or No.");
  CHECK(User("The sky is blue today.", q, {1, 0}) ==
        "State:\nThe sky is blue today.\n\nQuestion: Is the sky blue?\n"
        "Answer No or Yes.");
}

TEST_CASE("empty state prints (empty)", "[decision]") {
  const Question q = Question::Noul("Q?");
  CHECK(User("", q, {0, 1}).rfind("State:\n(empty)\n\nQuestion: Q?", 0) == 0);
}

TEST_CASE("choice at shift 1 and the split", "[decision]") {
  const auto q = Question::Choice("Which?", {"o0", "o1", "o2", "o3"});
  const PromptSpec spec =
      BuildPrompt("s", *q, {1, 2, 3, 0}, kDefaultSystem, AnswerLabels(*q));
  CHECK(spec.user ==
        "State:\ns\n\nQuestion: Which?\nOptions:\nA. o1\nB. o2\nC. o3\nD. o0\n"
        "Answer with the letter only.");
  CHECK(spec.user.substr(0, spec.split) ==
        "State:\ns\n\nQuestion: Which?\nOptions:\n");
}

TEST_CASE("score headers and the number/letter line", "[decision]") {
  const auto bins = Question::ScoreBins("How big?", 2);
  CHECK(User("s", *bins, {0, 1}) ==
        "State:\ns\n\nQuestion: How big?\nAnswer on a scale from 0 to 1 by "
        "picking the closest bin:\n1. 0 to 0.5\n2. 0.5 to 1\n"
        "Answer with the number only.");
  const auto levels = Question::ScoreLevels("Q?", {"low", "high"});
  const std::string user =
      BuildPrompt("s", *levels, {0, 1}, kDefaultSystem, {"A", "B"}).user;
  CHECK(user ==
        "State:\ns\n\nQuestion: Q?\nPick the level that applies (the levels "
        "are ordered):\nA. low\nB. high\nAnswer with the letter only.");
}

TEST_CASE("renders: fallback, Qwen3, and the cut", "[decision]") {
  const Question q = Question::Noul("Q?");
  const PromptSpec spec =
      BuildPrompt("s", q, {0, 1}, kDefaultSystem, AnswerLabels(q));
  const text::ChatParts none =
      RenderPromptParts(text::ChatTemplate::None(), spec);
  CHECK(none.prefix + none.suffix ==
        std::string(kDefaultSystem) + "\n\n" + spec.user + "\nAnswer:");
  CHECK(none.suffix == "Answer Yes or No.\nAnswer:");
  const text::ChatParts qwen =
      RenderPromptParts(text::ChatTemplate::Qwen3(), spec);
  CHECK(qwen.prefix + qwen.suffix ==
        "<|im_start|>system\n" + std::string(kDefaultSystem) +
            "<|im_end|>\n<|im_start|>user\n" + spec.user +
            "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  CHECK(qwen.prefix.size() > 0);
  CHECK(qwen.suffix.rfind("Answer Yes or No.<|im_end|>", 0) == 0);
  // A state holding the sentinel: no cut, and no sentinel of ours left in.
  const PromptSpec odd = BuildPrompt(std::string(text::kSplitSentinel), q,
                                     {0, 1}, kDefaultSystem, AnswerLabels(q));
  const text::ChatParts whole =
      RenderPromptParts(text::ChatTemplate::None(), odd);
  CHECK(whole.suffix.empty());
  CHECK(whole.prefix ==
        text::ChatTemplate::None().Render(kDefaultSystem, odd.user));
}

}  // namespace
}  // namespace mesa_anyjev::decision
