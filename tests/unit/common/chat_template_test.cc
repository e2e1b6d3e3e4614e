// Tests for the hand-rendered chat template: the Qwen3 rendering of the
// decision prompt (docs/decision.md, Prompts), the prefix/suffix split,
// template detection and refusal. Byte equality with transformers'
// apply_chat_template over many messages is the e2e test
// tests/e2e/test_chat_template_parity.py.
#include "common/text/chat_template.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/util/files.h"

namespace mesa_anyjev::text {
namespace {

namespace fs = std::filesystem;

const std::string kQwen3Dir =
    std::string(MESA_ANYJEV_TEST_DATA) + "/qwen3-tokenizer";

// A fresh directory under the system's temporary folder.
fs::path TempDir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("mesa-anyjev-chat-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Write(const fs::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

TEST_CASE("Qwen3 renders [system, user] with thinking disabled", "[chat]") {
  const auto tmpl = ChatTemplate::FromFile(kQwen3Dir);
  REQUIRE(tmpl.ok());
  CHECK(tmpl->kind() == ChatTemplate::Kind::kQwen3);
  CHECK(tmpl->name() == "qwen3");
  CHECK(tmpl->Render("You are a helpful assistant.",
                     "Is the sky blue? Answer Yes or No.") ==
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nIs the sky blue? Answer Yes or No.<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  CHECK(tmpl->Render("", "") ==
        "<|im_start|>system\n<|im_end|>\n<|im_start|>user\n<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST_CASE("RenderParts cuts at exactly one sentinel", "[chat]") {
  const ChatTemplate tmpl = ChatTemplate::Qwen3();
  const std::string user = "State:\nx\n\nQuestion: q?\n" +
                           std::string(kSplitSentinel) + "Answer Yes or No.";
  const ChatParts parts = tmpl.RenderParts("S", user);
  CHECK(parts.prefix ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n"
        "State:\nx\n\nQuestion: q?\n");
  CHECK(parts.suffix ==
        "Answer Yes or No.<|im_end|>\n<|im_start|>assistant\n"
        "<think>\n\n</think>\n\n");
  CHECK(parts.prefix + parts.suffix == tmpl.Render("S",
                                                   "State:\nx\n\n"
                                                   "Question: q?\n"
                                                   "Answer Yes or No."));

  const ChatParts none = tmpl.RenderParts("S", "no sentinel");
  CHECK(none.prefix == tmpl.Render("S", "no sentinel"));
  CHECK(none.suffix.empty());

  const std::string twice = "a" + std::string(kSplitSentinel) + "b" +
                            std::string(kSplitSentinel) + "c";
  const ChatParts two = tmpl.RenderParts("S", twice);
  CHECK(two.prefix == tmpl.Render("S", twice));
  CHECK(two.suffix.empty());

  // A sentinel in the system message counts too.
  const ChatParts in_system = tmpl.RenderParts(
      std::string(kSplitSentinel), "u" + std::string(kSplitSentinel));
  CHECK(in_system.suffix.empty());
  CHECK(kSplitSentinel == "\u2063ANYJEV_SPLIT\u2063");
}

TEST_CASE("Other templates are refused by sha256, naming the file", "[chat]") {
  const fs::path dir = TempDir("refuse");
  auto config = nlohmann::json::parse(
      *util::ReadFile(kQwen3Dir + "/tokenizer_config.json"));
  config["chat_template"] =
      config["chat_template"].get<std::string>() + " ";  // one byte more
  Write(dir / "tokenizer_config.json", config.dump());
  const auto refused = ChatTemplate::FromFile(dir.string());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  CHECK_THAT(message, Catch::StartsWith("unsupported chat template (sha256 "));
  CHECK_THAT(message,
             Catch::Contains((dir / "tokenizer_config.json").string()));

  // A list of named templates uses "default".
  config["chat_template"] = nlohmann::json::array(
      {{{"name", "tool_use"}, {"template", "x"}},
       {{"name", "default"},
        {"template",
         nlohmann::json::parse(*util::ReadFile(
             kQwen3Dir + "/tokenizer_config.json"))["chat_template"]}}});
  Write(dir / "tokenizer_config.json", config.dump());
  const auto listed = ChatTemplate::FromFile(dir.string());
  REQUIRE(listed.ok());
  CHECK(listed->kind() == ChatTemplate::Kind::kQwen3);

  // chat_template.jinja beside it wins, as in transformers.
  Write(dir / "chat_template.jinja", "{{ messages }}");
  const auto jinja = ChatTemplate::FromFile(dir.string());
  REQUIRE_FALSE(jinja.ok());
  CHECK_THAT(std::string(jinja.status().message()),
             Catch::Contains("chat_template.jinja"));
  fs::remove_all(dir);
}

TEST_CASE("No chat template: the decision method's plain fallback", "[chat]") {
  const fs::path dir = TempDir("none");
  Write(dir / "tokenizer_config.json", R"({"eos_token": "</s>"})");
  const auto tmpl = ChatTemplate::FromFile(dir.string());
  REQUIRE(tmpl.ok());
  CHECK(tmpl->kind() == ChatTemplate::Kind::kNone);
  CHECK(tmpl->Render("SYS", "USER") == "SYS\n\nUSER\nAnswer:");
  const ChatParts parts =
      tmpl->RenderParts("SYS", "A" + std::string(kSplitSentinel) + "B");
  CHECK(parts.prefix == "SYS\n\nA");
  CHECK(parts.suffix == "B\nAnswer:");
  CHECK_FALSE(ChatTemplate::FromFile((dir / "missing.json").string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mesa_anyjev::text
