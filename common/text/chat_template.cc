// ChatTemplate: template detection by sha256 and hand rendering (see
// chat_template.h).
#include "common/text/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"
#include "common/util/files.h"
#include "common/util/hash.h"

namespace mesa_anyjev::text {
namespace {

using Json = nlohmann::json;

// The Qwen3 template, checked with transformers 5.24 (tests/e2e/
// test_chat_template_parity.py).
constexpr std::string_view kQwen3Sha256 =
    "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5";

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplateText(
    std::string_view template_text, const std::string& source) {
  const std::string sha = util::Sha256Hex(template_text);
  if (sha == kQwen3Sha256) return Qwen3();
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported chat template (sha256 ", sha, ") in ", source,
      "; supported: Qwen3 (sha256 ", std::string(kQwen3Sha256), ")"));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path config_path = path;
  if (fs::is_directory(config_path, ec)) {
    const fs::path jinja = config_path / "chat_template.jinja";
    if (fs::exists(jinja, ec)) {
      ASSIGN_OR_RETURN(const std::string text, util::ReadFile(jinja.string()));
      return FromTemplateText(text, jinja.string());
    }
    config_path /= "tokenizer_config.json";
  }
  const std::string source = config_path.string();
  ASSIGN_OR_RETURN(const std::string text, util::ReadFile(source));
  auto parsed = ParseStrictJson(text, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", parsed.status().message()));
  }
  const Json config = *std::move(parsed);
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a JSON object"));
  }
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    return None();
  }
  const Json& chat_template = config["chat_template"];
  if (chat_template.is_string()) {
    return FromTemplateText(chat_template.get<std::string>(), source);
  }
  // A list of named templates: transformers uses "default" here.
  if (chat_template.is_array()) {
    for (const Json& entry : chat_template) {
      if (entry.is_object() && entry.value("name", "") == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return FromTemplateText(entry["template"].get<std::string>(), source);
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported chat template (neither a string nor a list with a "
      "\"default\" entry) in ",
      source));
}

std::string_view ChatTemplate::name() const {
  return kind_ == Kind::kQwen3 ? "qwen3" : "none";
}

std::string ChatTemplate::Render(std::string_view system,
                                 std::string_view user) const {
  if (kind_ == Kind::kNone) {
    return absl::StrCat(std::string(system), "\n\n", std::string(user),
                        "\nAnswer:");
  }
  // The Qwen3 template for [system, user]: the system turn (no tools), the
  // user turn, then the assistant header with an empty think block because
  // enable_thinking is false.
  return absl::StrCat("<|im_start|>system\n", std::string(system),
                      "<|im_end|>\n<|im_start|>user\n", std::string(user),
                      "<|im_end|>\n<|im_start|>assistant\n",
                      "<think>\n\n</think>\n\n");
}

ChatParts ChatTemplate::RenderParts(std::string_view system,
                                    std::string_view user_with_sentinel) const {
  std::string rendered = Render(system, user_with_sentinel);
  const size_t first = rendered.find(kSplitSentinel);
  if (first == std::string::npos ||
      rendered.find(kSplitSentinel, first + kSplitSentinel.size()) !=
          std::string::npos) {
    return {std::move(rendered), ""};
  }
  ChatParts parts;
  parts.prefix = rendered.substr(0, first);
  parts.suffix = rendered.substr(first + kSplitSentinel.size());
  return parts;
}

}  // namespace mesa_anyjev::text
