// Tests for the fake model's tokenizer: exact round trips, the id layout,
// single-token distinct labels, and the errors it must name.
#include "common/text/fake_tokenizer.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

namespace mesa_anyjev::text {
namespace {

std::vector<std::string> AllLabels() {
  std::vector<std::string> labels;
  for (char c = 'A'; c <= 'Z'; ++c) {
    labels.emplace_back(1, c);
  }
  for (char c = '0'; c <= '9'; ++c) {
    labels.emplace_back(1, c);
  }
  labels.emplace_back("Yes");
  labels.emplace_back("No");
  return labels;
}

TEST_CASE("FakeTokenizer round-trips varied text exactly", "[fake_tokenizer]") {
  const FakeTokenizer tok;
  const std::vector<std::string> texts = {
      "",
      "hello",
      "Answer with the letter only.",
      "A. apple: a fruit\nB. banana\nC. Yes\nAnswer Yes or No.\nAnswer:",
      "h\xc3\xa9llo w\xc3\xb6rld \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac "
      "\xf0\x9f\x8e\x89",  // é ö — 日本 🎉
      "<|im_start|>user\nState:\n(empty)<|im_end|>\n<|im_start|>assistant\n",
      "<|im_sta <|im_end <|endoftext|><|endoftext|>",
      "\t\r\n\x01\x7f",
      std::string("nul\0inside", 10),
      "{\n  \"candidate\": {\"label\": \"Soil pH\"}\n}",
      "Yesterday No. Nobody A1 10 AB  Z Yes",
  };
  for (const std::string& text : texts) {
    INFO("text: " << text);
    const auto ids = tok.Encode(text);
    REQUIRE(ids.ok());
    for (const TokenId id : *ids) {
      REQUIRE(id >= 0);
      REQUIRE(id < tok.vocab_size());
    }
    const auto back = tok.Decode(*ids);
    REQUIRE(back.ok());
    CHECK(*back == text);
  }
}

TEST_CASE("FakeTokenizer id layout is as documented", "[fake_tokenizer]") {
  const FakeTokenizer tok;
  CHECK(tok.vocab_size() == 335);
  CHECK(tok.LabelId("A") == 259);
  CHECK(tok.LabelId("Z") == 284);
  CHECK(tok.LabelId("0") == 285);
  CHECK(tok.LabelId("Yes") == 295);
  CHECK(tok.LabelId("No") == 296);
  CHECK(tok.LabelId(" A") == 297);
  CHECK(tok.LabelId(" No") == 334);
  CHECK(tok.LabelId("Maybe") == -1);
  CHECK(tok.LabelId("10") == -1);
  CHECK(tok.LabelId("  A") == -1);
  const auto ids = tok.Encode("ab");
  REQUIRE(ids.ok());
  CHECK(*ids == std::vector<TokenId>{'a', 'b'});
}

TEST_CASE("Special tokens are matched anywhere", "[fake_tokenizer]") {
  const FakeTokenizer tok;
  const auto ids = tok.Encode("x<|im_end|>y<|im_start|><|endoftext|>");
  REQUIRE(ids.ok());
  CHECK(*ids == std::vector<TokenId>{'x', FakeTokenizer::kImEndId, 'y',
                                     FakeTokenizer::kImStartId,
                                     FakeTokenizer::kEndOfTextId});
  // Specials win over labels and word boundaries do not matter for them.
  const auto glued = tok.Encode("A<|im_end|>");
  REQUIRE(glued.ok());
  CHECK(*glued ==
        std::vector<TokenId>{tok.LabelId("A"), FakeTokenizer::kImEndId});
  const auto text = tok.Decode({FakeTokenizer::kImStartId});
  REQUIRE(text.ok());
  CHECK(*text == "<|im_start|>");
}

TEST_CASE("Every label is one token, bare and spaced, with distinct ids",
          "[fake_tokenizer]") {
  const FakeTokenizer tok;
  std::set<TokenId> seen;
  for (const std::string& label : AllLabels()) {
    for (const std::string& form : {label, " " + label}) {
      INFO("label form: '" << form << "'");
      const auto ids = tok.Encode(form);
      REQUIRE(ids.ok());
      REQUIRE(ids->size() == 1);
      CHECK((*ids)[0] == tok.LabelId(form));
      CHECK((*ids)[0] >= FakeTokenizer::kFirstLabelId);
      CHECK(seen.insert((*ids)[0]).second);
    }
  }
  CHECK(seen.size() == 76);
}

TEST_CASE("Labels end at word boundaries", "[fake_tokenizer]") {
  const FakeTokenizer tok;
  const auto answer = tok.Encode("Answer");
  REQUIRE(answer.ok());
  CHECK(*answer == std::vector<TokenId>{'A', 'n', 's', 'w', 'e', 'r'});

  const auto option = tok.Encode("A. x");
  REQUIRE(option.ok());
  CHECK(*option == std::vector<TokenId>{tok.LabelId("A"), '.', ' ', 'x'});

  const auto yes = tok.Encode("Answer Yes or No.");
  REQUIRE(yes.ok());
  CHECK(*yes == std::vector<TokenId>{'A', 'n', 's', 'w', 'e', 'r',
                                     tok.LabelId(" Yes"), ' ', 'o', 'r',
                                     tok.LabelId(" No"), '.'});

  // "Yesterday" and "Nobody" are words, not labels.
  const auto words = tok.Encode("Yesterday Nobody");
  REQUIRE(words.ok());
  CHECK(words->size() == 16);
  // "10" has no token of its own: a byte, then the label "0".
  const auto ten = tok.Encode("10");
  REQUIRE(ten.ok());
  CHECK(*ten == std::vector<TokenId>{'1', tok.LabelId("0")});
}

TEST_CASE("Invalid UTF-8 is refused with the byte offset", "[fake_tokenizer]") {
  const FakeTokenizer tok;
  struct Case {
    std::string text;
    std::string offset;
  };
  const std::vector<Case> cases = {
      {"ab\xff", "offset 2"},            // never valid in UTF-8
      {"\xe6\x97", "offset 0"},          // truncated 3-byte sequence
      {"ok \xc0\xaf", "offset 3"},       // overlong '/'
      {"x\xed\xa0\x80", "offset 1"},     // UTF-16 surrogate
      {"\xf4\x90\x80\x80", "offset 0"},  // above U+10FFFF
      {"\xc3\xa9\x80", "offset 2"},      // stray continuation byte
  };
  for (const Case& c : cases) {
    const auto ids = tok.Encode(c.text);
    REQUIRE_FALSE(ids.ok());
    CHECK(ids.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(ids.status().message()), Catch::Contains(c.offset));
  }
  CHECK(FirstInvalidUtf8("\xf0\x9f\x8e\x89 ok") == -1);
}

TEST_CASE("Decode refuses ids outside the vocabulary", "[fake_tokenizer]") {
  const FakeTokenizer tok;
  for (const TokenId bad : {335, -1, 100000}) {
    const auto text = tok.Decode({'a', bad});
    REQUIRE_FALSE(text.ok());
    CHECK(text.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(text.status().message());
    CHECK_THAT(message, Catch::Contains(std::to_string(bad)));
    CHECK_THAT(message, Catch::Contains("vocab_size=335"));
  }
  // Byte ids may spell invalid UTF-8; decoding still returns the bytes.
  const auto raw = tok.Decode({0xff, 0x00});
  REQUIRE(raw.ok());
  CHECK(*raw == std::string("\xff\0", 2));
}

}  // namespace
}  // namespace mesa_anyjev::text
