// `mesa-anyjev tokenize`: the byte-level BPE tokenizer of a checkpoint
// directory, offline, over JSON lines. Encode reads {"text": ...} and writes
// {"ids": [...]}; --decode reads {"ids": [...]} and writes {"text": ...}.
// The first bad line stops the run with exit 2 and a message naming the line
// and the reason on stderr; the lines before it are written whole, nothing of
// the bad one.
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/commands/commands.h"
#include "common/text/bpe_tokenizer.h"
#include "common/text/strict_json.h"
#include "common/text/utf8.h"

namespace mesa_anyjev::client {
namespace {

using Json = nlohmann::json;

// The output line for one input line, or why the line is bad.
absl::StatusOr<std::string> EncodeLine(const text::BpeTokenizer& tokenizer,
                                       const Json& input) {
  if (!input.is_object() || !input.contains("text") ||
      !input["text"].is_string()) {
    return absl::InvalidArgumentError(
        "expected an object with a string \"text\"");
  }
  auto ids = tokenizer.Encode(input["text"].get_ref<const std::string&>());
  if (!ids.ok()) return ids.status();
  return Json{{"ids", *ids}}.dump();
}

absl::StatusOr<std::string> DecodeLine(const text::BpeTokenizer& tokenizer,
                                       const Json& input) {
  if (!input.is_object() || !input.contains("ids") ||
      !input["ids"].is_array()) {
    return absl::InvalidArgumentError(
        "expected an object with an array \"ids\"");
  }
  std::vector<text::TokenId> ids;
  ids.reserve(input["ids"].size());
  for (const Json& id : input["ids"]) {
    if (!id.is_number_integer() ||
        id.get<int64_t>() < std::numeric_limits<text::TokenId>::min() ||
        id.get<int64_t>() > std::numeric_limits<text::TokenId>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"ids\" holds ", id.dump(), ", not a token id"));
    }
    ids.push_back(static_cast<text::TokenId>(id.get<int64_t>()));
  }
  auto decoded = tokenizer.Decode(ids);
  if (!decoded.ok()) return decoded.status();
  return Json{{"text", *decoded}}.dump();
}

}  // namespace

int RunTokenize(const TokenizeOptions& options) {
  auto tokenizer = text::BpeTokenizer::FromFile(options.tokenizer_dir);
  if (!tokenizer.ok()) {
    std::cerr << "mesa-anyjev: " << tokenizer.status().message() << "\n";
    return 2;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  int64_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<std::string> output =
        absl::InvalidArgumentError("not valid JSON");
    try {
      const auto input = text::ParseStrictJson(line, {});
      output = !input.ok()      ? absl::StatusOr<std::string>(input.status())
               : options.decode ? DecodeLine(**tokenizer, *input)
                                : EncodeLine(**tokenizer, *input);
    } catch (const Json::exception& e) {
      output = absl::InvalidArgumentError(
          absl::StrCat("malformed: ", text::Printable(e.what(), 512)));
    }
    if (!output.ok()) {
      std::cout.flush();
      std::cerr << "mesa-anyjev: stdin line " << line_number << ": "
                << output.status().message() << "\n";
      return 2;
    }
    std::cout << *output << '\n';
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}

}  // namespace mesa_anyjev::client
