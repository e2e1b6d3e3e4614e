// The readout prompt (docs/decision.md, Prompts; anyjev
// readout.build_prompt and render_chat_parts): a constant system line, a user
// message of a prefix that is the same for every permutation of one state
// (State, Question, the kind's header) and a suffix that carries the options in
// the permuted order, rendered through the model's chat format. The
// prefix/suffix cut is what lets the engine compute a state's prefix once for
// all its shifts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/decision/question.h"
#include "common/text/chat_template.h"

namespace mesa_anyjev::decision {

// DEFAULT_SYSTEM, one line, no trailing newline.
inline constexpr std::string_view kDefaultSystem =
    "You are a decision function. You will be given a state and one "
    "question. Reply with the answer label only: no words, no punctuation, "
    "no explanation.";

struct PromptSpec {
  std::string system;
  std::string user;
  size_t split = 0;  // user[split:] is the permutation-specific suffix
};

// perm[j] = the option shown at position j; labels[j] = the label shown
// there (for noul, labels name the options and perm orders the phrasing).
// An empty state prints as "(empty)".
PromptSpec BuildPrompt(std::string_view state_text, const Question& question,
                       const std::vector<int>& perm, std::string_view system,
                       const std::vector<std::string>& labels);

// The rendered prompt cut at the sentinel placed at spec.split; when the
// rendered text does not hold the sentinel exactly once, the prompt is
// rendered again without it and the whole of it is the prefix.
text::ChatParts RenderPromptParts(const text::ChatTemplate& chat_template,
                                  const PromptSpec& spec);

}  // namespace mesa_anyjev::decision
