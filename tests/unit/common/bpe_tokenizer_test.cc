// Tests for the byte-level BPE tokenizer: the reference encodings of the
// real Qwen3 tokenizer.json (measured with an independent encoder, the
// decision method's label tokens among them), errors on bad input, decode
// rules, thread safety, and small synthetic tokenizer.json files for the
// options Qwen does not use. Parity with Hugging Face tokenizers over 10,000+
// strings is the e2e test tests/e2e/test_tokenizer_parity.py.
#include "common/text/bpe_tokenizer.h"

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/text/bpe_model.h"
#include "common/text/byte_level.h"

namespace mesa_anyjev::text {
namespace {

using Ids = std::vector<TokenId>;
using Json = nlohmann::json;

const std::string kQwen3Dir =
    std::string(MESA_ANYJEV_TEST_DATA) + "/qwen3-tokenizer";

// Loaded once: parsing the 11 MB file takes a few hundred milliseconds.
const BpeTokenizer& Qwen3() {
  static const std::unique_ptr<BpeTokenizer> tok = [] {
    auto loaded = BpeTokenizer::FromFile(kQwen3Dir + "/tokenizer.json");
    if (!loaded.ok()) {
      FAIL("cannot load the Qwen3 tokenizer: " << loaded.status().message());
    }
    return std::move(loaded).value();
  }();
  return *tok;
}

Ids Encode(const BpeTokenizer& tok, const std::string& text) {
  auto ids = tok.Encode(text);
  REQUIRE(ids.ok());
  return *ids;
}

TEST_CASE("Qwen3 reference encodings", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  struct Case {
    std::string text;
    Ids ids;
  };
  const std::vector<Case> cases = {
      {" Yes", {7414}},
      {" No", {2308}},
      {"A", {32}},
      {" A", {362}},
      {"Yes", {9454}},
      {"No", {2753}},
      {"B", {33}},
      {"Z", {57}},
      {"0", {15}},
      {"1", {16}},
      {"9", {24}},
      {"10", {16, 15}},
      {" 1", {220, 16}},
      {"Hello, my dog is cute", {9707, 11, 847, 5562, 374, 18838}},
      {"<|im_start|>", {151644}},
      {"<think>", {151667}},
      {"<|endoftext|>", {151643}},
      {"na\xC3\xAFve caf\xC3\xA9 "
       "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C"
       " 12345\n\n  end ",
       {3376, 37572, 586, 51950, 220, 108386, 99489, 220, 16, 17, 18, 19, 20,
        271, 220, 835, 220}},
      {"don't I'LL go!!\r\n", {15007, 944, 358, 6, 4086, 728, 2928, 319}},
      {"<|im_start|>user\nhi<|im_end|>\n",
       {151644, 872, 198, 6023, 151645, 198}},
      {"hi there", {6023, 1052}},
      {"", {}},
  };
  for (const Case& c : cases) {
    INFO("text: " << c.text);
    CHECK(Encode(tok, c.text) == c.ids);
  }
}

TEST_CASE("Qwen3 chat prompt encodes and decodes back exactly", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  const std::string prompt =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nIs the sky blue? Answer Yes or No.<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const Ids expected = {151644, 8948,   198,    2610,   525,    264,    10950,
                        17847,  13,     151645, 198,    151644, 872,    198,
                        3872,   279,    12884,  6303,   30,     21806,  7414,
                        476,    2308,   13,     151645, 198,    151644, 77091,
                        198,    151667, 271,    151668, 271};
  const Ids ids = Encode(tok, prompt);
  CHECK(ids == expected);
  const auto back = tok.Decode(ids);
  REQUIRE(back.ok());
  CHECK(*back == prompt);
}

TEST_CASE("Qwen3 vocabulary facts and token lookup", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  CHECK(tok.vocab_size() == 151669);
  CHECK(tok.regex_jit());
  CHECK(tok.TokenToId("<|im_start|>") == 151644);
  CHECK(tok.TokenToId("<|im_end|>") == 151645);
  CHECK(tok.TokenToId("</think>") == 151668);
  CHECK(tok.TokenToId("\xC4\xA0Yes") == 7414);  // "ĠYes"
  CHECK(tok.TokenToId(" Yes") == -1);           // spelled as in the vocab
  CHECK(tok.TokenToId("<|no_such_token|>") == -1);
  CHECK(tok.IdToToken(151644) == "<|im_start|>");
  CHECK(tok.IdToToken(7414) == "\xC4\xA0Yes");
  CHECK(tok.IdToToken(151669).empty());
  CHECK(tok.IsSpecial(151643));
  CHECK(tok.IsSpecial(151656));
  CHECK_FALSE(tok.IsSpecial(151657));  // <tool_call> is added, not special
  CHECK_FALSE(tok.IsSpecial(151667));  // <think>
  CHECK_FALSE(tok.IsSpecial(7414));
}

TEST_CASE("Invalid UTF-8 is INVALID_ARGUMENT naming the byte offset", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  struct Case {
    std::string text;
    std::string offset;
  };
  const std::vector<Case> cases = {
      {"ab\xff", "offset 2"},
      {"\xe6\x97", "offset 0"},
      {"ok \xc0\xaf", "offset 3"},
      {"x\xed\xa0\x80", "offset 1"},
      {"\xf4\x90\x80\x80", "offset 0"},
      {"\xc3\xa9\x80", "offset 2"},
      {"<|im_start|>\xfe", "offset 12"},
      {std::string("a\0b\xf5", 4), "offset 3"},
  };
  for (const Case& c : cases) {
    const auto ids = tok.Encode(c.text);
    REQUIRE_FALSE(ids.ok());
    CHECK(ids.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(ids.status().message()), Catch::Contains(c.offset));
  }
  // NUL is valid UTF-8 and a byte token like any other.
  CHECK(Encode(tok, std::string("a\0b", 3)).size() == 3);
}

TEST_CASE("Decode: range errors, replacement of invalid UTF-8", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  for (const TokenId bad : {-1, 151669, 151935, 1 << 30}) {
    const auto text = tok.Decode({9707, bad});
    REQUIRE_FALSE(text.ok());
    CHECK(text.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(text.status().message()),
               Catch::Contains(std::to_string(bad)));
  }
  const TokenId ff = tok.TokenToId("\xC3\xBF");  // "ÿ" spells byte 0xFF
  REQUIRE(ff >= 0);
  const auto lossy = tok.Decode({9707, ff, 9707});
  REQUIRE(lossy.ok());
  CHECK(*lossy == "Hello\xEF\xBF\xBDHello");
  // The first two bytes of "你" (E4 BD A0): one U+FFFD for the cut sequence.
  const Ids you = Encode(tok, "\xE4\xBD\xA0");
  const auto whole = tok.Decode(you);
  REQUIRE(whole.ok());
  CHECK(*whole == "\xE4\xBD\xA0");
  const TokenId e4 = tok.TokenToId(ByteLevelEncode("\xE4"));
  const TokenId bd = tok.TokenToId(ByteLevelEncode("\xBD"));
  const auto cut = tok.Decode({e4, bd, 32});
  REQUIRE(cut.ok());
  CHECK(*cut ==
        "\xEF\xBF\xBD"
        "A");
  CHECK(*tok.Decode({}) == "");
}

TEST_CASE("Long inputs: whitespace runs, one huge word, many words", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  for (const std::string& text :
       {std::string(1 << 20, ' '), std::string(1 << 20, 'a'),
        std::string(200000, '\n') + "x", std::string(100000, '!')}) {
    const Ids ids = Encode(tok, text);
    CHECK_FALSE(ids.empty());
    const auto back = tok.Decode(ids);
    REQUIRE(back.ok());
    CHECK(*back == text);
  }
}

TEST_CASE("Encode is thread-safe and deterministic", "[bpe]") {
  const BpeTokenizer& tok = Qwen3();
  std::vector<std::string> texts;
  std::mt19937 rng(7);
  const std::vector<std::string> words = {
      "hello",        " world",     "\xE4\xBD\xA0\xE5\xA5\xBD",
      " caf\xC3\xA9", "'s",         " 2024",
      "\n\n",         "<|im_end|>", " \xF0\x9F\x98\x80",
      "  ",           "don't"};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (int j = 0, n = 1 + static_cast<int>(rng() % 40); j < n; ++j) {
      text += words[rng() % words.size()];
    }
    texts.push_back(text);
  }
  std::vector<Ids> expected;
  for (const std::string& text : texts) expected.push_back(Encode(tok, text));
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i * 7 + static_cast<size_t>(t)) % texts.size();
          auto ids = tok.Encode(texts[k]);
          if (!ids.ok() || *ids != expected[k]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const int m : mismatches) CHECK(m == 0);
}

// A byte-level BPE model over the 256 byte symbols (ids 0..255 in byte
// order) plus `extra` tokens, with `merges` as pairs of spellings.
BpeModel MakeModel(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  absl::flat_hash_map<std::string, TokenId> vocab;
  std::array<TokenId, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    byte_ids[b] = b;
    vocab[std::string(1, static_cast<char>(b))] = b;
  }
  absl::flat_hash_map<uint64_t, BpeModel::Merge> table;
  int32_t rank = 0;
  for (const auto& [left, right] : merges) {
    const auto merged =
        vocab.try_emplace(left + right, static_cast<TokenId>(vocab.size()));
    table[BpeModel::PairKey(vocab.at(left), vocab.at(right))] = {
        rank++, merged.first->second};
  }
  BpeModel::Options options;
  options.cache_capacity = 0;
  return BpeModel(byte_ids, std::move(table), {}, options);
}

TEST_CASE("The short and the long merge loops agree", "[bpe]") {
  // Overlapping and competing merges over a 3-letter alphabet.
  const BpeModel model = MakeModel({{"a", "a"},
                                    {"b", "a"},
                                    {"aa", "a"},
                                    {"a", "b"},
                                    {"aa", "aa"},
                                    {"ab", "a"},
                                    {"c", "c"},
                                    {"ba", "aa"},
                                    {"aaa", "b"},
                                    {"cc", "ab"},
                                    {"aaaa", "aaaa"}});
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    std::string word;
    for (int j = 0, n = 2 + static_cast<int>(rng() % 60); j < n; ++j) {
      word.push_back("abc"[rng() % 3]);
    }
    Ids small, large, cached;
    model.MergeSmall(word, &small);
    model.MergeLarge(word, &large);
    model.EncodeWord(word, &cached);
    INFO("word: " << word);
    REQUIRE(small == large);
    REQUIRE(cached == small);
  }
  // Equal ranks merge leftmost first: "aaa" -> "aa" + "a".
  Ids ids;
  model.MergeLarge("aaa", &ids);
  CHECK(ids.size() == 1);  // then "aa"+"a" -> "aaa" (rank 2)
}

// A minimal byte-level tokenizer.json: the 256 byte symbols, "he", "ll",
// "hell", "hello" and the merges that build them, plus `patch` applied.
std::string TinyJson(const std::function<void(Json*)>& patch = {}) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = b;
  }
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  Json root = {{"normalizer", {{"type", "NFC"}}},
               {"pre_tokenizer",
                {{"type", "ByteLevel"},
                 {"add_prefix_space", false},
                 {"use_regex", true}}},
               {"decoder", {{"type", "ByteLevel"}}},
               {"added_tokens", Json::array()},
               {"model",
                {{"type", "BPE"},
                 {"vocab", vocab},
                 {"merges", {"h e", "l l", "he ll", "hell o"}}}}};
  if (patch) patch(&root);
  return root.dump();
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> Tiny(
    const std::function<void(Json*)>& patch = {}) {
  return BpeTokenizer::FromJson(TinyJson(patch), "tiny.json");
}

TEST_CASE("Bare ByteLevel pre-tokenizer with GPT-2's regex, string merges",
          "[bpe]") {
  auto tok = Tiny();
  REQUIRE(tok.ok());
  CHECK((*tok)->vocab_size() == 260);
  // "hello" is one token; " hello" is a space then "hello" (no merge for
  // "Ġh"); GPT-2's regex keeps "'s" apart.
  CHECK(Encode(**tok, "hello") == Ids{259});
  CHECK(Encode(**tok, "hello hello's") == Ids{259, 32, 259, 39, 115});
  CHECK(*(*tok)->Decode(Encode(**tok, "hello hello's")) == "hello hello's");
}

TEST_CASE("Added tokens: lstrip, rstrip, single_word, normalized", "[bpe]") {
  auto tok = Tiny([](Json* root) {
    (*root)["added_tokens"] = {
        {{"id", 300},
         {"content", "[CLS]"},
         {"special", true},
         {"normalized", false}},
        {{"id", 301},
         {"content", "<m>"},
         {"lstrip", true},
         {"rstrip", true},
         {"normalized", false}},
        {{"id", 302},
         {"content", "ony"},
         {"single_word", true},
         {"normalized", false}},
        // NFC-normalized spelling "é" matches "e" + U+0301 too.
        {{"id", 303}, {"content", "\xC3\xA9!"}, {"normalized", true}},
    };
  });
  REQUIRE(tok.ok());
  const BpeTokenizer& t = **tok;
  CHECK(t.vocab_size() == 304);
  // lstrip/rstrip absorb the spaces around "<m>".
  CHECK(Encode(t, "hello  <m>  hello") == Ids{259, 301, 259});
  // single_word: not inside "Anthony", but alone.
  CHECK(Encode(t, "thony") == Ids{116, 104, 111, 110, 121});
  CHECK(Encode(t, "x ony") == Ids{120, 32, 302});
  CHECK(Encode(t, "[CLS]hello") == Ids{300, 259});
  CHECK(Encode(t, "e\xCC\x81!") == Ids{303});
  CHECK(Encode(t, "\xC3\xA9!") == Ids{303});
  CHECK(t.IsSpecial(300));
  CHECK_FALSE(t.IsSpecial(301));
  CHECK(*t.Decode({300, 259}) == "[CLS]hello");
}

TEST_CASE("ignore_merges takes whole-vocabulary words as they are", "[bpe]") {
  auto tok = Tiny([](Json* root) {
    (*root)["model"]["ignore_merges"] = true;
    (*root)["model"]["vocab"]["lo"] = 260;  // reachable by no merge
  });
  REQUIRE(tok.ok());
  CHECK(Encode(**tok, "lo") == Ids{260});
  CHECK(Encode(**tok, "hello") == Ids{259});
}

TEST_CASE("Unsupported tokenizer.json parts are refused by name", "[bpe]") {
  struct Case {
    std::function<void(Json*)> patch;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](Json* r) {
         (*r)["normalizer"] = {{"type", "NFKC"}};
       },
       "unsupported normalizer 'NFKC'"},
      {[](Json* r) {
         (*r)["normalizer"] = {
             {"type", "Sequence"},
             {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
       },
       "unsupported normalizer 'Lowercase'"},
      {[](Json* r) {
         (*r)["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "unsupported pre_tokenizer 'Whitespace'"},
      {[](Json* r) {
         (*r)["pre_tokenizer"] = {{"type", "Sequence"},
                                  {"pretokenizers",
                                   {{{"type", "Split"},
                                     {"pattern", {{"Regex", "\\s+"}}},
                                     {"behavior", "MergedWithPrevious"}},
                                    {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"use_regex", false}}}}};
       },
       "unsupported Split behavior 'MergedWithPrevious'"},
      {[](Json* r) { (*r)["pre_tokenizer"]["add_prefix_space"] = true; },
       "add_prefix_space=true"},
      {[](Json* r) {
         (*r)["decoder"] = {{"type", "WordPiece"}};
       },
       "unsupported decoder 'WordPiece'"},
      {[](Json* r) { (*r)["model"]["type"] = "Unigram"; },
       "unsupported model 'Unigram'"},
      {[](Json* r) { (*r)["model"]["byte_fallback"] = true; }, "byte_fallback"},
      {[](Json* r) { (*r)["model"]["dropout"] = 0.1; }, "dropout"},
      {[](Json* r) { (*r)["model"]["merges"].push_back("x yz"); }, "merge 4"},
      {[](Json* r) { (*r)["model"]["vocab"].erase("a"); },
       "byte-level symbol of byte 97"},
      {[](Json* r) {
         (*r)["pre_tokenizer"] = {{"type", "Sequence"},
                                  {"pretokenizers",
                                   {{{"type", "Split"},
                                     {"pattern", {{"Regex", "(unclosed"}}},
                                     {"behavior", "Isolated"}},
                                    {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"use_regex", false}}}}};
       },
       "split regex does not compile"},
      // An id sizes the tables it indexes (a fuzzer's 2.5e9 asked for 40 GB).
      {[](Json* r) { (*r)["model"]["vocab"]["hello"] = 2097152; },
       "vocab entry hello has an id that is not an integer in [0, 2097152)"},
      {[](Json* r) {
         (*r)["added_tokens"] = {{{"id", int64_t{2505379840}},
                                  {"content", "<|x|>"},
                                  {"special", true}}};
       },
       "has an id that is not an integer in [0, 2097152)"},
  };
  for (const Case& c : cases) {
    const auto tok = Tiny(c.patch);
    INFO("expected: " << c.message);
    REQUIRE_FALSE(tok.ok());
    CHECK(tok.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(tok.status().message()),
               Catch::Contains(c.message) && Catch::Contains("tiny.json"));
  }
  const auto missing = BpeTokenizer::FromFile("/nonexistent/tokenizer.json");
  CHECK_FALSE(missing.ok());
  const auto not_json = BpeTokenizer::FromJson("{", "broken.json");
  REQUIRE_FALSE(not_json.ok());
  CHECK_THAT(std::string(not_json.status().message()),
             Catch::Contains("broken.json") && Catch::Contains("JSON"));
}

TEST_CASE("A tokenizer directory is as good as its tokenizer.json", "[bpe]") {
  const auto tok = BpeTokenizer::FromFile(kQwen3Dir);
  REQUIRE(tok.ok());
  CHECK((*tok)->vocab_size() == 151669);
}

}  // namespace
}  // namespace mesa_anyjev::text
