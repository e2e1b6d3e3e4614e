// Label tokens (docs/decision.md, Labels) on the real Qwen3 tokenizer and on
// the fake model's: bare first, then with a space, single tokens, no
// collisions, score falling back to letters at K = 10.
#include "common/decision/label_resolver.h"

#include <catch2/catch.hpp>
#include <memory>

#include "common/text/bpe_tokenizer.h"
#include "common/text/fake_tokenizer.h"

namespace mesa_anyjev::decision {
namespace {

const text::Tokenizer& Qwen3() {
  static const auto* tokenizer =
      text::BpeTokenizer::FromFile(std::string(MESA_ANYJEV_TEST_DATA) +
                                   "/qwen3-tokenizer/tokenizer.json")
          ->release();
  return *tokenizer;
}

TEST_CASE("Qwen3 label ids", "[decision]") {
  const auto noul = ResolveLabels(Qwen3(), Question::Noul("Q"));
  REQUIRE(noul.ok());
  CHECK(noul->ids == std::vector<text::TokenId>{9454, 2753});
  CHECK(LabelIdsForPerm(Question::Noul("Q"), noul->ids, {1, 0}) ==
        std::vector<text::TokenId>{2753, 9454});
  std::vector<std::string> options;
  for (int i = 0; i < 26; ++i) options.push_back("o" + std::to_string(i));
  const auto choice = ResolveLabels(Qwen3(), *Question::Choice("Q", options));
  REQUIRE(choice.ok());
  for (int i = 0; i < 26; ++i) CHECK(choice->ids[i] == 32 + i);
  const auto score9 = ResolveLabels(Qwen3(), *Question::ScoreBins("Q", 9));
  REQUIRE(score9.ok());
  CHECK(score9->labels[0] == "1");
  for (int i = 0; i < 9; ++i) CHECK(score9->ids[i] == 16 + i);
  const auto score10 = ResolveLabels(Qwen3(), *Question::ScoreBins("Q", 10));
  REQUIRE(score10.ok());
  CHECK(score10->labels[9] == "J");
  for (int i = 0; i < 10; ++i) CHECK(score10->ids[i] == 32 + i);
}

TEST_CASE("a label that is not one token is refused by name", "[decision]") {
  auto q = *Question::Choice("Q", {"x", "y"});
  REQUIRE(q.SetCustomLabels({"A", "apple pie"}).ok());
  const auto labels = ResolveLabels(Qwen3(), q);
  REQUIRE(absl::IsInvalidArgument(labels.status()));
  CHECK(labels.status().message().find("\"apple pie\"") != std::string::npos);
  // Collisions: " A" and "A" differ, but two identical ids do not pass.
  const auto ids = MapLabelTokens(Qwen3(), {"A", "A"});
  CHECK(absl::IsInvalidArgument(ids.status()));
}

TEST_CASE("the fake tokenizer's labels are bare tokens", "[decision]") {
  const text::FakeTokenizer fake;
  const auto labels = ResolveLabels(fake, Question::Noul("Q"));
  REQUIRE(labels.ok());
  CHECK(labels->ids[0] == fake.LabelId("Yes"));
  CHECK(labels->ids[1] == fake.LabelId("No"));
}

}  // namespace
}  // namespace mesa_anyjev::decision
