// The gateway's /v1/completions mapping: the bodies it sends (one prompt,
// its labels by text or by id, the token-ids probe) and what it reads back
// from an answer (the top_logprobs map, each label's logprob, the top list).
#include "common/gateway/completions_mapping.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/gateway/completion_answer.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::gateway {
namespace {

using Logprobs = std::vector<std::optional<double>>;

const text::BpeTokenizer& Qwen3() {
  static const auto* tokenizer =
      text::BpeTokenizer::FromFile(std::string(MESA_ANYJEV_TEST_DATA) +
                                   "/qwen3-tokenizer/tokenizer.json")
          ->release();
  return *tokenizer;
}

constexpr TokenId kYes = 9454;  // "Yes" in Qwen3's vocabulary
constexpr TokenId kNo = 2753;   // "No"

std::vector<TokenId> Ids(const std::vector<TopToken>& top) {
  std::vector<TokenId> ids;
  for (const TopToken& token : top) ids.push_back(token.id);
  return ids;
}

TEST_CASE("completions: one greedy token with its top logprobs", "[gateway]") {
  // nlohmann writes the keys sorted: the body is the same byte for byte.
  CHECK(CompletionRequest("qwen", "Is it blue?", 20) ==
        R"({"logprobs":20,"max_tokens":1,"model":"qwen",)"
        R"("prompt":"Is it blue?","temperature":0.0})");
}

TEST_CASE("completions: a label request by text asks only for the top list",
          "[gateway]") {
  for (int32_t top_k : {0, 5}) {
    INFO("top_k " << top_k);
    CHECK(LabelRequest("qwen", "Q", 20, LabelReadout::kTopK, {kYes, kNo},
                       top_k) == CompletionRequest("qwen", "Q", 20));
  }
}

TEST_CASE("completions: a label request by id", "[gateway]") {
  SECTION("top_k 0 names each label once, by id, in place of the top list") {
    const auto body = nlohmann::json::parse(LabelRequest(
        "qwen", "Q", 20, LabelReadout::kTokenIds, {kYes, kNo, kYes}, 0));
    CHECK(body["logprob_token_ids"] == nlohmann::json({kNo, kYes}));
    CHECK(body["logprobs"] == 1);
    CHECK(body["return_tokens_as_token_ids"] == true);
    CHECK(body["prompt"] == "Q");
    CHECK(body["max_tokens"] == 1);
  }
  SECTION("top_k > 0 keeps the top list and reads the labels from it") {
    const auto body = nlohmann::json::parse(
        LabelRequest("qwen", "Q", 20, LabelReadout::kTokenIds, {kYes, kNo}, 5));
    CHECK_FALSE(body.contains("logprob_token_ids"));
    CHECK(body["logprobs"] == 20);
    CHECK(body["return_tokens_as_token_ids"] == true);
  }
  SECTION("no labels: nothing to name") {
    const auto body = nlohmann::json::parse(
        LabelRequest("qwen", "Q", 20, LabelReadout::kTokenIds, {}, 0));
    CHECK_FALSE(body.contains("logprob_token_ids"));
    CHECK(body["logprobs"] == 20);
    CHECK(body["return_tokens_as_token_ids"] == true);
  }
}

TEST_CASE("completions: the token-ids probe asks for yes, then no, by id",
          "[gateway]") {
  const auto body = nlohmann::json::parse(TokenIdsProbe("qwen", kYes, kNo));
  // In the order given, not sorted: yes (9454) before no (2753).
  CHECK(body["logprob_token_ids"] == nlohmann::json({kYes, kNo}));
  CHECK(body["return_tokens_as_token_ids"] == true);
  CHECK(body["prompt"] == kProbePrompt);
  CHECK(body["logprobs"] == 1);
  CHECK(body["max_tokens"] == 1);
  CHECK(body["temperature"] == 0.0);
  CHECK(body["model"] == "qwen");
}

TEST_CASE("completions: labels read by id, in the labels' order", "[gateway]") {
  const std::map<std::string, double> top = {
      {TokenIdKey(kYes), -0.25}, {TokenIdKey(kNo), -1.5}, {"Maybe", -3.0}};
  const Logprobs values =
      LabelLogprobs(top, {kNo, kYes, 42}, LabelReadout::kTokenIds, Qwen3());
  REQUIRE(values.size() == 3);
  CHECK(values[0] == -1.5);
  CHECK(values[1] == -0.25);
  CHECK_FALSE(values[2].has_value());  // One substitutes kMissingLogprob
  CHECK(kMissingLogprob == -30.0);
}

TEST_CASE("completions: labels read by text, then by raw spelling",
          "[gateway]") {
  const TokenId space_yes = Qwen3().TokenToId("\xC4\xA0Yes");  // "ĠYes"
  const TokenId space_no = Qwen3().TokenToId("\xC4\xA0No");
  REQUIRE(space_yes >= 0);
  REQUIRE(space_no >= 0);
  const std::map<std::string, double> top = {{"Yes", -0.5},
                                             {" Yes", -2.0},
                                             {"\xC4\xA0No", -4.0},
                                             {TokenIdKey(kNo), -1.0}};
  const Logprobs values = LabelLogprobs(top, {kYes, space_yes, space_no, kNo},
                                        LabelReadout::kTopK, Qwen3());
  REQUIRE(values.size() == 4);
  CHECK(values[0] == -0.5);
  CHECK(values[1] == -2.0);  // decoded " Yes"
  CHECK(values[2] == -4.0);  // " No" is absent; its raw spelling is there
  // By text, an id key is not a label's spelling: "No" is missing.
  CHECK_FALSE(values[3].has_value());
}

TEST_CASE("completions: the top list by id, most likely first, cut at top_k",
          "[gateway]") {
  const std::map<std::string, double> top = {
      {TokenIdKey(7), -2.0}, {TokenIdKey(3), -0.5}, {TokenIdKey(11), -1.0},
      {"Yes", -0.1},         {"token_id:-4", -0.2}, {"token_id:x", -0.3}};
  const auto all = TopTokens(top, 10, LabelReadout::kTokenIds, Qwen3());
  CHECK(Ids(all) == std::vector<TokenId>{3, 11, 7});
  REQUIRE(all.size() == 3);
  CHECK(all[0].logprob == -0.5);
  CHECK(Ids(TopTokens(top, 2, LabelReadout::kTokenIds, Qwen3())) ==
        std::vector<TokenId>{3, 11});
  CHECK(TopTokens(top, 0, LabelReadout::kTokenIds, Qwen3()).empty());
}

TEST_CASE("completions: the top list by text keeps keys of one token",
          "[gateway]") {
  const TokenId space_no = Qwen3().TokenToId("\xC4\xA0No");
  const std::map<std::string, double> top = {
      {"Yes", -0.1},                      // a vocabulary spelling
      {" No", -0.7},                      // a text that encodes to one id
      {"\xC4\xA0Yes", -0.4},              // a raw spelling
      {"The sky is blue today.", -0.05},  // several tokens: dropped
      {TokenIdKey(kNo), -0.2}};           // "token_id:2753" is no token
  const auto tokens = TopTokens(top, 10, LabelReadout::kTopK, Qwen3());
  CHECK(Ids(tokens) ==
        std::vector<TokenId>{kYes, Qwen3().TokenToId("\xC4\xA0Yes"), space_no});
  CHECK(Ids(TopTokens(top, 1, LabelReadout::kTopK, Qwen3())) ==
        std::vector<TokenId>{kYes});
}

TEST_CASE("completions: an answer's top_logprobs map", "[gateway]") {
  const auto top = ParseTopLogprobs(
      R"({"choices":[{"logprobs":{"top_logprobs":[)"
      R"({"Yes":-0.5,"No":-1,"odd":"x","none":null},{"later":-9}]}}]})");
  REQUIRE(top.ok());
  // Entries that are not numbers are dropped; only the first position counts.
  CHECK(*top == std::map<std::string, double>{{"No", -1.0}, {"Yes", -0.5}});
}

TEST_CASE("completions: a malformed answer is refused, naming the field",
          "[gateway]") {
  for (const char* body :
       {"", "not json", "[]", R"({"choices":[]})", R"({"choices":[{}]})",
        R"({"choices":[{"logprobs":null}]})",
        R"({"choices":[{"logprobs":{"top_logprobs":[]}}]})",
        R"({"choices":[{"logprobs":{"top_logprobs":[null]}}]})",
        R"({"choices":[{"logprobs":{"top_logprobs":[[-1.0]]}}]})",
        R"({"choices":{"logprobs":{"top_logprobs":[{"a":-1}]}}})"}) {
    INFO(body);
    const auto top = ParseTopLogprobs(body);
    REQUIRE_FALSE(top.ok());
    CHECK(top.status().code() == absl::StatusCode::kInternal);
    CHECK_THAT(std::string(top.status().message()),
               Catch::StartsWith("gateway answer has no "
                                 "choices[0].logprobs.top_logprobs[0]: "));
  }
  // The body is quoted, cut at 300 bytes.
  const std::string long_body =
      "{\"error\": \"" + std::string(400, 'x') + "\"}";
  const std::string message(ParseTopLogprobs(long_body).status().message());
  CHECK_THAT(message, Catch::Contains("{\"error\": \"xxx"));
  CHECK_THAT(message, !Catch::Contains("\"}"));
}

}  // namespace
}  // namespace mesa_anyjev::gateway
