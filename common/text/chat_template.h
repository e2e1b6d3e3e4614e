// ChatTemplate: the chat rendering the decision method needs (a system and
// a user message, the generation prompt, thinking disabled), written out by
// hand for the templates we have checked byte for byte against transformers'
// apply_chat_template, instead of running a Jinja engine. A checkpoint whose
// template is not one of those is refused, naming the template's sha256.
//
// Verified templates (sha256 of the chat_template string):
//   87a2728c...96b5  Qwen3 (tokenizer_config.json of the Qwen3 checkpoints;
//                    tests/data/qwen3-tokenizer/): renders
//   "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}"
//   "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
// A tokenizer_config.json without any chat template gets the decision
// method's fallback "{system}\n\n{user}\nAnswer:" (docs/decision.md, Prompts).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::text {

// Marks the prefix/suffix cut in a user message: U+2063, ANYJEV_SPLIT,
// U+2063, invisible and never produced by a template (docs/decision.md,
// Prompts).
inline constexpr std::string_view kSplitSentinel =
    "\xE2\x81\xA3"
    "ANYJEV_SPLIT"
    "\xE2\x81\xA3";

// A rendered prompt cut in two: prefix + suffix is the whole prompt.
struct ChatParts {
  std::string prefix;
  std::string suffix;
};

class ChatTemplate {
 public:
  enum class Kind { kQwen3, kNone };

  // The template of a tokenizer_config.json (or of the directory holding
  // one; a chat_template.jinja beside it takes precedence, as in
  // transformers). An unverified template is INVALID_ARGUMENT:
  // "unsupported chat template (sha256 ...) in <path>".
  static absl::StatusOr<ChatTemplate> FromFile(const std::string& path);
  // The same from a template's text (nullptr-free; `source` names it).
  static absl::StatusOr<ChatTemplate> FromTemplateText(
      std::string_view template_text, const std::string& source);

  static ChatTemplate Qwen3() { return ChatTemplate(Kind::kQwen3); }
  static ChatTemplate None() { return ChatTemplate(Kind::kNone); }

  Kind kind() const { return kind_; }
  std::string_view name() const;  // "qwen3", "none"

  // [system, user] with the generation prompt and thinking disabled, as
  // apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
  // enable_thinking=False) renders it. Contents go in verbatim.
  std::string Render(std::string_view system, std::string_view user) const;

  // Render, then cut at the one kSplitSentinel in the result (removed). When
  // it occurs other than exactly once there is no cut: prefix is the whole
  // rendered prompt (as rendered, sentinels included), suffix is empty.
  ChatParts RenderParts(std::string_view system,
                        std::string_view user_with_sentinel) const;

 private:
  explicit ChatTemplate(Kind kind) : kind_(kind) {}

  Kind kind_;
};

}  // namespace mesa_anyjev::text
