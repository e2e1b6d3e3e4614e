// chat_render: a test tool for tests/e2e/test_chat_template_parity.py.
// Loads the chat template of a tokenizer_config.json (or a checkpoint
// directory) and, for each JSON line {"system": ..., "user": ...} on stdin,
// writes {"text": Render, "prefix": ..., "suffix": ...} (RenderParts).
// Exit 2 with the message on stderr when the template is refused.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/text/chat_template.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: chat_render TOKENIZER_CONFIG_OR_DIR < lines\n";
    return 2;
  }
  const auto tmpl = mesa_anyjev::text::ChatTemplate::FromFile(argv[1]);
  if (!tmpl.ok()) {
    std::cerr << "chat_render: " << tmpl.status().message() << "\n";
    return 2;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto input = nlohmann::json::parse(line);
    const std::string system = input.at("system").get<std::string>();
    const std::string user = input.at("user").get<std::string>();
    const auto parts = tmpl->RenderParts(system, user);
    std::cout << nlohmann::json{{"text", tmpl->Render(system, user)},
                                {"prefix", parts.prefix},
                                {"suffix", parts.suffix}}
                     .dump()
              << '\n';
  }
  return 0;
}
