// Tests for the fake model: it must parse the readout prompt, score options
// with the reference content function and position bias, return a proper
// full-vocabulary distribution, plant a readable signal in its hidden states
// and honour deadlines and cancellation.
#include "common/fake_backend.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace mesa_anyjev {
namespace {

using text::FakeTokenizer;

constexpr char kSystem[] =
    "You are a decision function. You will be given a state and one "
    "question. Reply with the answer label only: no words, no punctuation, "
    "no explanation.";

// The prefix of a user message (docs/decision.md, Prompts).
std::string UserPrefix(const std::string& state, const std::string& question,
                       bool choice) {
  return "State:\n" + (state.empty() ? std::string("(empty)") : state) +
         "\n\nQuestion: " + question + "\n" + (choice ? "Options:\n" : "");
}

// The suffix of a choice: "A. o\nB. o\n...Answer with the letter only."
std::string ChoiceSuffix(const std::vector<std::string>& options) {
  std::string suffix;
  for (size_t j = 0; j < options.size(); ++j) {
    suffix +=
        std::string(1, static_cast<char>('A' + j)) + ". " + options[j] + "\n";
  }
  return suffix + "Answer with the letter only.";
}

std::string NoulSuffix(bool yes_first) {
  return yes_first ? "Answer Yes or No." : "Answer No or Yes.";
}

// The no-template fallback render, split so the tail is in the suffix.
std::pair<std::string, std::string> Fallback(const std::string& prefix,
                                             const std::string& suffix) {
  return {std::string(kSystem) + "\n\n" + prefix, suffix + "\nAnswer:"};
}

// A Qwen3-style chat render with enable_thinking=False.
std::pair<std::string, std::string> ChatRender(const std::string& prefix,
                                               const std::string& suffix) {
  return {
      "<|im_start|>system\n" + std::string(kSystem) +
          "<|im_end|>\n<|im_start|>user\n" + prefix,
      suffix + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"};
}

std::vector<TokenId> Ids(const FakeTokenizer& tok, const std::string& text) {
  auto ids = tok.Encode(text);
  REQUIRE(ids.ok());
  return *std::move(ids);
}

std::vector<TokenId> BareLabelIds(const FakeTokenizer& tok,
                                  const std::vector<std::string>& labels) {
  std::vector<TokenId> ids;
  for (const std::string& label : labels) {
    ids.push_back(tok.LabelId(label));
  }
  return ids;
}

std::vector<TokenId> LetterIds(const FakeTokenizer& tok, size_t k) {
  std::vector<std::string> labels;
  for (size_t j = 0; j < k; ++j) {
    labels.emplace_back(1, static_cast<char>('A' + j));
  }
  return BareLabelIds(tok, labels);
}

PromptGroup Group(const FakeTokenizer& tok,
                  const std::pair<std::string, std::string>& parts,
                  std::vector<TokenId> label_ids) {
  PromptGroup group;
  group.prefix = Ids(tok, parts.first);
  group.suffixes.push_back(Ids(tok, parts.second));
  group.label_ids = std::move(label_ids);
  return group;
}

// Label logprobs of a single-prompt group.
std::vector<double> LabelLogprobs(FakeBackend& backend,
                                  const PromptGroup& group) {
  auto out = backend.Logprobs({group}, 0, CallControl{});
  REQUIRE(out.ok());
  REQUIRE(out->size() == 1);
  REQUIRE((*out)[0].size() == 1);
  return (*out)[0][0].label_logprobs;
}

std::vector<TokenId> AllIds() {
  std::vector<TokenId> ids(FakeTokenizer::kVocabSize);
  for (TokenId id = 0; id < FakeTokenizer::kVocabSize; ++id) {
    ids[id] = id;
  }
  return ids;
}

double LogSumExp(const std::vector<double>& xs) {
  const double max = *std::max_element(xs.begin(), xs.end());
  double sum = 0.0;
  for (const double x : xs) {
    sum += std::exp(x - max);
  }
  return max + std::log(sum);
}

size_t ArgMax(const std::vector<double>& xs) {
  return static_cast<size_t>(std::max_element(xs.begin(), xs.end()) -
                             xs.begin());
}

const std::vector<std::string> kFruits = {
    "apple: a crisp fruit", "banana: a yellow fruit", "cherry: a red fruit"};

TEST_CASE("FakeBackend identity and capabilities", "[fake_backend]") {
  const FakeBackend a;
  const FakeBackend b(FakeBackendOptions{.delay_s = 0.5});
  CHECK(a.identity().name == "fake");
  CHECK(a.identity().identity.size() == 64);
  CHECK(a.identity().identity.find_first_not_of("0123456789abcdef") ==
        std::string::npos);
  CHECK(a.identity().identity == b.identity().identity);
  CHECK(a.identity().dtype == "float32");
  CHECK(a.identity().device == "cpu");
  CHECK(a.identity().attention == "none (synthetic)");
  const Capabilities& caps = a.capabilities();
  CHECK(caps.hidden_states);
  CHECK(caps.early_stop);
  CHECK(caps.max_choice_k == 26);
  CHECK(caps.logprob_top_k == 0);
  CHECK(caps.n_layers == 4);
  CHECK(caps.hidden_size == 64);
  CHECK(caps.vocab_size == a.tokenizer().vocab_size());
  CHECK(caps.vocab_size == 335);
}

TEST_CASE("ParseFakePrompt reads state, options and the Yes/No line",
          "[fake_backend]") {
  const auto [prefix, suffix] =
      Fallback(UserPrefix("{\n  \"a\": 1\n}", "Which fruit?", true),
               ChoiceSuffix(kFruits));
  const FakePrompt choice = ParseFakePrompt(prefix + suffix);
  CHECK(choice.state == "{\n  \"a\": 1\n}");
  CHECK(choice.labels == std::vector<std::string>{"A", "B", "C"});
  CHECK(choice.options == kFruits);

  const auto [p2, s2] =
      ChatRender(UserPrefix("", "Is it?", false), NoulSuffix(false));
  const FakePrompt noul = ParseFakePrompt(p2 + s2);
  CHECK(noul.state.empty());  // "(empty)"
  CHECK(noul.labels == std::vector<std::string>{"No", "Yes"});
  CHECK(noul.options == noul.labels);

  const FakePrompt score = ParseFakePrompt(
      "State:\nx\n\nQuestion: q\n1. low\n2. high\n10. top\nAnswer:");
  CHECK(score.labels == std::vector<std::string>{"1", "2", "10"});
  CHECK(score.options == std::vector<std::string>{"low", "high", "top"});

  const FakePrompt nothing = ParseFakePrompt("just some text\nA.no space");
  CHECK(nothing.state.empty());
  CHECK(nothing.labels.empty());
}

// Expected values from the reference Python default_fake_content on the
// same inputs.
TEST_CASE("DefaultFakeContent reproduces the reference", "[fake_backend]") {
  // Python's value up to rounding: a compiler may fuse the jitter's multiply
  // and add (FMA, e.g. on aarch64), which moves the last bit.
  const auto Ref = [](double v) { return Approx(v).margin(1e-12); };
  const std::string overlap =
      "{\n  \"candidate\": {\n    \"label\": \"Systolic blood pressure\",\n"
      "    \"curie\": \"EFO:0006335\"\n  },\n  \"column\": {\n    \"name\": "
      "\"BP_SYS\",\n    \"description\": \"systolic pressure (mmHg)\"\n  }\n}";
  const std::string disjoint =
      "{\n  \"candidate\": {\n    \"label\": \"Body mass index\",\n"
      "    \"curie\": \"EFO:0004340\"\n  },\n  \"column\": {\n    \"name\": "
      "\"age_years\",\n    \"description\": \"age at visit\"\n  }\n}";
  const std::string term_site =
      "{\n  \"term\": {\n    \"label\": \"Soil pH\",\n    \"id\": "
      "\"ENVO:1\"\n  },\n  \"site\": {\n    \"name\": \"ph of soil "
      "sample\"\n  }\n}";
  const std::string cand_only =
      "{\n  \"candidate\": {\n    \"label\": \"Soil pH\"\n  }\n}";
  const std::string ident = "The \"identifier\" column holds sample codes.";
  const std::string unicode =
      "{\n  \"note\": \"\xc3\x89"
      "CLAIR et \xc5\x8csaka\"\n}";  // ÉCLAIR, Ōsaka
  CHECK(DefaultFakeContent(overlap, "Yes") == Ref(1.6308));
  CHECK(DefaultFakeContent(overlap, "No") == Ref(-1.6216));
  CHECK(DefaultFakeContent(disjoint, "Yes") == Ref(-1.1756));
  CHECK(DefaultFakeContent(disjoint, "No") == Ref(0.8828));
  CHECK(DefaultFakeContent(term_site, "Yes") == Ref(1.472));
  CHECK(DefaultFakeContent(cand_only, "Yes") == Ref(0.3928));
  CHECK(DefaultFakeContent(cand_only, "No") == Ref(-0.5328));
  CHECK(DefaultFakeContent(ident, "Yes") == Ref(-1.508));
  CHECK(DefaultFakeContent(ident, "No") == Ref(1.4412));
  CHECK(DefaultFakeContent("plain text", "Yes") == Ref(0.5652));
  CHECK(DefaultFakeContent("The customer asked for a banana.",
                           "banana: a yellow fruit") == Ref(0.8464));
  CHECK(DefaultFakeContent("The customer asked for a banana.",
                           "Apple pie: dessert") == Ref(-0.05840000000000001));
  CHECK(DefaultFakeContent(unicode,
                           "\xc3\x89"
                           "clair: pastry") == Ref(0.8188));
  CHECK(DefaultFakeContent(unicode, "\xc5\x8dsaka city") == Ref(1.1908));
  CHECK(DefaultFakeContent("", "anything") == Ref(0.0836));
}

TEST_CASE("Logprobs form a distribution over the full vocabulary",
          "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const auto parts = Fallback(
      UserPrefix("The customer asked for a banana.", "Which fruit?", true),
      ChoiceSuffix(kFruits));
  const std::vector<double> lp =
      LabelLogprobs(backend, Group(tok, parts, AllIds()));
  REQUIRE(lp.size() == 335);
  CHECK(std::abs(LogSumExp(lp)) < 1e-9);
  // The labels carry most of the mass; the rest is spread evenly.
  const std::vector<TokenId> abc = LetterIds(tok, 3);
  double label_mass = 0.0;
  for (const TokenId id : abc) {
    label_mass += std::exp(lp[id]);
  }
  CHECK(label_mass > 0.95);
  CHECK(label_mass < 1.0);
  CHECK(lp['x'] == lp[FakeTokenizer::kImEndId]);
  CHECK(lp['x'] == lp[tok.LabelId(" A")]);  // only bare labels are scored
}

TEST_CASE("The option whose head word is in the state wins", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  for (const auto& render : {Fallback, ChatRender}) {
    const auto parts =
        render(UserPrefix("{\n  \"request\": \"one banana, please\"\n}",
                          "Which fruit does the customer want?", true),
               ChoiceSuffix(kFruits));
    const std::vector<double> lp =
        LabelLogprobs(backend, Group(tok, parts, LetterIds(tok, 3)));
    CHECK(ArgMax(lp) == 1);  // B, despite A's larger position bias
  }
}

TEST_CASE("Top-k lists the most likely ids, ties by lower id",
          "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const PromptGroup group =
      Group(tok,
            Fallback(UserPrefix("one banana", "Which fruit?", true),
                     ChoiceSuffix(kFruits)),
            AllIds());
  auto out = backend.Logprobs({group}, 5, CallControl{});
  REQUIRE(out.ok());
  const PromptLogprobs& p = (*out)[0][0];
  REQUIRE(p.top.size() == 5);
  CHECK(p.top[0].id == tok.LabelId("B"));
  CHECK(p.top[0].logprob == p.label_logprobs[tok.LabelId("B")]);
  // After the three labels come the equal rest ids, lowest first.
  CHECK(p.top[3].id == 0);
  CHECK(p.top[4].id == 1);
  CHECK(p.top[3].logprob == p.top[4].logprob);
  CHECK(p.n_tokens ==
        static_cast<int32_t>(group.prefix.size() + group.suffixes[0].size()));

  auto all = backend.Logprobs({group}, 100000, CallControl{});
  REQUIRE(all.ok());
  CHECK((*all)[0][0].top.size() == 335);
  auto none = backend.Logprobs({group}, 0, CallControl{});
  REQUIRE(none.ok());
  CHECK((*none)[0][0].top.empty());
  CHECK(backend.Logprobs({group}, -1, CallControl{}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Position bias is visible with equal content", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  // The same option twice: same content and jitter, only the position differs.
  const auto parts =
      Fallback(UserPrefix("nothing relevant here", "Which one?", true),
               ChoiceSuffix({"widget", "widget", "gadget"}));
  const std::vector<double> lp =
      LabelLogprobs(backend, Group(tok, parts, LetterIds(tok, 3)));
  CHECK(lp[0] - lp[1] == Approx((0.6 - 0.2) / 0.7).margin(1e-12));
}

TEST_CASE("Content-free probe states give pure position bias",
          "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const std::vector<std::string> options = {"apple: probe", "banana", "cherry",
                                            "damson", "elder"};
  // Logits are bias / 0.7 (0 past the 4th position) plus one rest logit -5.
  const std::vector<double> logits = {0.6 / 0.7, 0.2 / 0.7, 0.0, -0.1 / 0.7,
                                      0.0};
  std::vector<double> with_rest = logits;
  with_rest.push_back(-5.0);
  const double log_z = LogSumExp(with_rest);
  std::vector<double> first;
  for (const std::string probe : {"N/A", "", "[MASK]"}) {
    INFO("probe state: '" << probe << "'");
    const auto parts = Fallback(UserPrefix(probe, "Which fruit?", true),
                                ChoiceSuffix(options));
    const std::vector<double> lp =
        LabelLogprobs(backend, Group(tok, parts, LetterIds(tok, 5)));
    for (size_t j = 0; j < lp.size(); ++j) {
      CHECK(lp[j] == Approx(logits[j] - log_z).margin(1e-12));
    }
    if (first.empty()) {
      first = lp;
    } else {
      CHECK(lp == first);
    }
  }
  // A real state with the same options is not pure bias: "apple" is in it.
  const auto real = Fallback(UserPrefix("an apple", "Which fruit?", true),
                             ChoiceSuffix(options));
  const std::vector<double> lp =
      LabelLogprobs(backend, Group(tok, real, LetterIds(tok, 5)));
  CHECK(lp[0] - lp[1] > 1.0 / 0.7);
}

TEST_CASE("Yes/No follows candidate-column word overlap", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const std::string overlap =
      "{\n  \"candidate\": {\n    \"label\": \"Systolic blood pressure\"\n  "
      "},\n  \"column\": {\n    \"name\": \"systolic_bp\"\n  }\n}";
  const std::string disjoint =
      "{\n  \"candidate\": {\n    \"label\": \"Body mass index\"\n  },\n  "
      "\"column\": {\n    \"name\": \"age_years\"\n  }\n}";
  for (const bool yes_first : {true, false}) {
    for (const auto& render : {Fallback, ChatRender}) {
      // Label ids handed over as "Yes", "No" regardless of the phrasing.
      const std::vector<TokenId> ids = BareLabelIds(tok, {"Yes", "No"});
      const std::vector<double> match = LabelLogprobs(
          backend,
          Group(tok,
                render(UserPrefix(overlap, "Is the term right?", false),
                       NoulSuffix(yes_first)),
                ids));
      const std::vector<double> miss = LabelLogprobs(
          backend,
          Group(tok,
                render(UserPrefix(disjoint, "Is the term right?", false),
                       NoulSuffix(yes_first)),
                ids));
      INFO("yes_first=" << yes_first);
      CHECK(match[0] > match[1]);
      CHECK(miss[0] < miss[1]);
    }
  }
}

TEST_CASE("Fallback and chat renders score the same", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const std::string prefix =
      UserPrefix("The sky is blue today.", "Is the sky blue?", false);
  const std::vector<TokenId> ids = BareLabelIds(tok, {"Yes", "No"});
  const std::vector<double> plain = LabelLogprobs(
      backend, Group(tok, Fallback(prefix, NoulSuffix(true)), ids));
  const std::vector<double> chat = LabelLogprobs(
      backend, Group(tok, ChatRender(prefix, NoulSuffix(true)), ids));
  CHECK(plain == chat);
}

TEST_CASE("A prompt with no options is uniform", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const PromptGroup group = Group(tok, {"Tell me a story.", ""}, AllIds());
  const std::vector<double> lp = LabelLogprobs(backend, group);
  for (const double x : lp) {
    REQUIRE(x == Approx(-std::log(335.0)).margin(1e-12));
  }
}

TEST_CASE("Logprobs are deterministic across backends and splits",
          "[fake_backend]") {
  FakeBackend a;
  FakeBackend b;
  const FakeTokenizer& tok = a.fake_tokenizer();
  PromptGroup group;
  const std::string prefix =
      std::string(kSystem) + "\n\n" + UserPrefix("one cherry", "Which?", true);
  group.prefix = Ids(tok, prefix);
  for (int shift = 0; shift < 3; ++shift) {
    std::vector<std::string> shown;
    for (int j = 0; j < 3; ++j) {
      shown.push_back(kFruits[(j + shift) % 3]);
    }
    group.suffixes.push_back(Ids(tok, ChoiceSuffix(shown) + "\nAnswer:"));
  }
  group.label_ids = AllIds();
  auto ra = a.Logprobs({group, group}, 10, CallControl{});
  auto rb = b.Logprobs({group, group}, 10, CallControl{});
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  REQUIRE(ra->size() == 2);
  for (size_t g = 0; g < 2; ++g) {
    REQUIRE((*ra)[g].size() == 3);
    for (size_t s = 0; s < 3; ++s) {
      CHECK((*ra)[g][s].label_logprobs == (*rb)[g][s].label_logprobs);
      for (size_t r = 0; r < 10; ++r) {
        CHECK((*ra)[g][s].top[r].id == (*rb)[g][s].top[r].id);
        CHECK((*ra)[g][s].top[r].logprob == (*rb)[g][s].top[r].logprob);
      }
    }
  }
  // The cherry wins at every shift: position 2, 1, 0.
  for (size_t s = 0; s < 3; ++s) {
    CHECK((*ra)[0][s].top[0].id ==
          tok.LabelId(std::string(1, 'A' + (2 - s) % 3)));
  }
  // Where the prompt is split does not matter.
  PromptGroup whole;
  whole.prefix = group.prefix;
  for (TokenId id : group.suffixes[1]) {
    whole.prefix.push_back(id);
  }
  whole.suffixes.push_back({});
  whole.label_ids = group.label_ids;
  CHECK(LabelLogprobs(a, whole) == (*ra)[0][1].label_logprobs);
  CHECK(a.prompts_seen() == 7);
  CHECK(a.calls() == 2);
}

TEST_CASE("Concurrent callers get the single-threaded answer",
          "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const PromptGroup group = Group(
      tok,
      Fallback(UserPrefix("a banana", "Which?", true), ChoiceSuffix(kFruits)),
      LetterIds(tok, 3));
  const std::vector<double> expected = LabelLogprobs(backend, group);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto out = backend.Logprobs({group}, 3, CallControl{});
        if (!out.ok() || (*out)[0][0].label_logprobs != expected) {
          mismatches.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  CHECK(mismatches.load() == 0);
  CHECK(backend.prompts_seen() == 81);
}

TEST_CASE("Logprobs validates its input", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  auto empty = backend.Logprobs({}, 0, CallControl{});
  REQUIRE(empty.ok());
  CHECK(empty->empty());

  PromptGroup no_suffixes;
  no_suffixes.prefix = Ids(tok, "hello");
  auto zero = backend.Logprobs({no_suffixes}, 0, CallControl{});
  REQUIRE(zero.ok());
  REQUIRE(zero->size() == 1);
  CHECK((*zero)[0].empty());

  PromptGroup blank;
  blank.suffixes.push_back({});
  auto blank_out = backend.Logprobs({blank}, 0, CallControl{});
  CHECK(blank_out.status().code() == absl::StatusCode::kInvalidArgument);

  PromptGroup bad_label = no_suffixes;
  bad_label.suffixes.push_back(Ids(tok, " world"));
  bad_label.label_ids = {tok.LabelId("A"), 335};
  auto label_out = backend.Logprobs({bad_label}, 0, CallControl{});
  REQUIRE(label_out.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(label_out.status().message()),
             Catch::Contains("335") && Catch::Contains("vocab_size=335"));

  PromptGroup bad_token = no_suffixes;
  bad_token.suffixes.push_back({-3});
  auto token_out = backend.Logprobs({bad_token}, 0, CallControl{});
  REQUIRE(token_out.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(token_out.status().message()), Catch::Contains("-3"));
  CHECK(backend.prompts_seen() == 0);
}

TEST_CASE("HiddenStates shape and layer resolution", "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  PromptGroup group = Group(
      tok,
      Fallback(UserPrefix("a banana", "Which?", true), ChoiceSuffix(kFruits)),
      {});
  group.suffixes.push_back(Ids(tok, "A. banana\nB. apple\nAnswer:"));
  auto hs = backend.HiddenStates({group, group}, {0, -1, 2}, CallControl{});
  REQUIRE(hs.ok());
  CHECK(hs->layers == std::vector<int32_t>{0, 4, 2});
  CHECK(hs->n_prompts == 4);
  CHECK(hs->hidden_size == 64);
  CHECK(hs->values.size() == 4u * 3u * 64u);

  // -1 is layer 4, and a layer's values do not depend on the others asked.
  auto last = backend.HiddenStates({group}, {4, -1}, CallControl{});
  REQUIRE(last.ok());
  const std::vector<float>& v = last->values;
  REQUIRE(v.size() == 2u * 2u * 64u);
  for (int h = 0; h < 64; ++h) {
    CHECK(v[h] == v[64 + h]);
    CHECK(v[h] == hs->values[64 + h]);  // prompt 0, second requested layer
  }

  auto all = backend.HiddenStates({group}, {}, CallControl{});
  REQUIRE(all.ok());
  CHECK(all->layers == std::vector<int32_t>{0, 1, 2, 3, 4});

  for (const int32_t bad : {5, -6}) {
    auto refused = backend.HiddenStates({group}, {bad}, CallControl{});
    REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(refused.status().message()),
               Catch::Contains("n_layers=4"));
  }

  // Deterministic across backends, bit for bit.
  FakeBackend other;
  auto again = other.HiddenStates({group, group}, {0, -1, 2}, CallControl{});
  REQUIRE(again.ok());
  CHECK(again->values == hs->values);
}

TEST_CASE("The last-layer vector carries the planted signal",
          "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  auto hs = backend.HiddenStates(
      {Group(tok,
             Fallback(UserPrefix("a banana", "Which?", true),
                      ChoiceSuffix(kFruits)),
             {})},
      {4}, CallControl{});
  REQUIRE(hs.ok());
  const std::vector<float>& v = hs->values;
  // Position bias in dims 0..2 (three options), nothing past them.
  CHECK(v[0] == Approx(0.6 / 0.7).margin(0.1));
  CHECK(v[1] == Approx(0.2 / 0.7).margin(0.1));
  CHECK(std::abs(v[5]) < 0.1);
  double state_norm2 = 0.0;
  double option_norm2 = 0.0;
  for (int h = 26; h < 38; ++h) {
    state_norm2 += v[h] * v[h];
  }
  for (int h = 38; h < 50; ++h) {
    option_norm2 += v[h] * v[h];
  }
  CHECK(std::sqrt(state_norm2) == Approx(1.0).margin(0.15));
  CHECK(std::sqrt(option_norm2) == Approx(1.0).margin(0.15));

  // A probe state has no winner: the option dims are noise only.
  auto probe = backend.HiddenStates(
      {Group(tok,
             Fallback(UserPrefix("N/A", "Which?", true), ChoiceSuffix(kFruits)),
             {})},
      {4}, CallControl{});
  REQUIRE(probe.ok());
  for (int h = 38; h < 50; ++h) {
    CHECK(std::abs(probe->values[h]) < 0.15);
  }
}

// Leave-one-out nearest-class-mean accuracy over rows of `features`.
double NearestClassMeanAccuracy(const std::vector<std::vector<double>>& x,
                                const std::vector<int>& y, int n_classes) {
  int correct = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<std::vector<double>> mean(
        n_classes, std::vector<double>(x[i].size(), 0.0));
    std::vector<int> count(n_classes, 0);
    for (size_t k = 0; k < x.size(); ++k) {
      if (k == i) {
        continue;
      }
      ++count[y[k]];
      for (size_t h = 0; h < x[k].size(); ++h) {
        mean[y[k]][h] += x[k][h];
      }
    }
    int best = -1;
    double best_d2 = 0.0;
    for (int c = 0; c < n_classes; ++c) {
      double d2 = 0.0;
      for (size_t h = 0; h < x[i].size(); ++h) {
        const double diff = x[i][h] - mean[c][h] / count[c];
        d2 += diff * diff;
      }
      if (best < 0 || d2 < best_d2) {
        best = c;
        best_d2 = d2;
      }
    }
    correct += best == y[i] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(x.size());
}

TEST_CASE("A linear readout finds the winner on deep layers only",
          "[fake_backend]") {
  FakeBackend backend;
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const std::vector<std::string> heads = {"apple", "banana", "cherry"};
  std::vector<PromptGroup> groups;
  std::vector<int> winner;
  for (int i = 0; i < 42; ++i) {
    const int w = (i * 7 + i / 3) % 3;
    const std::string state = "{\n  \"order\": " + std::to_string(i) +
                              ",\n  \"wants\": \"a " + heads[w] + "\"\n}";
    std::vector<std::string> shown;
    for (int j = 0; j < 3; ++j) {
      shown.push_back(kFruits[(j + i) % 3]);  // the winner moves around
    }
    groups.push_back(Group(
        tok,
        Fallback(UserPrefix(state, "Which fruit?", true), ChoiceSuffix(shown)),
        LetterIds(tok, 3)));
    winner.push_back(w);
  }
  // The readout agrees with what Logprobs picks.
  auto lp = backend.Logprobs(groups, 0, CallControl{});
  REQUIRE(lp.ok());
  for (size_t i = 0; i < groups.size(); ++i) {
    const size_t pos = ArgMax((*lp)[i][0].label_logprobs);
    CHECK(ParseFakePrompt(*tok.Decode(groups[i].prefix) +
                          *tok.Decode(groups[i].suffixes[0]))
              .options[pos]
              .substr(0, heads[winner[i]].size()) == heads[winner[i]]);
  }
  auto hs = backend.HiddenStates(groups, {0, 3, 4}, CallControl{});
  REQUIRE(hs.ok());
  std::vector<double> accuracy;
  for (size_t l = 0; l < 3; ++l) {
    std::vector<std::vector<double>> x;
    for (size_t p = 0; p < groups.size(); ++p) {
      const float* row = hs->values.data() + (p * 3 + l) * 64;
      x.emplace_back(row, row + 64);
    }
    accuracy.push_back(NearestClassMeanAccuracy(x, winner, 3));
  }
  INFO("accuracy at layers 0, 3, 4: " << accuracy[0] << ", " << accuracy[1]
                                      << ", " << accuracy[2]);
  CHECK(accuracy[2] >= 0.9);
  CHECK(accuracy[1] > accuracy[0] + 0.2);  // the signal grows with depth
  CHECK(accuracy[0] <= 0.6);               // chance is 1/3
}

TEST_CASE("A delayed call stops at the deadline", "[fake_backend]") {
  // Not before the deadline, and (the proof) not the whole 60 s delay.
  FakeBackend backend(FakeBackendOptions{.delay_s = 60.0});
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const PromptGroup group =
      Group(tok, Fallback(UserPrefix("x", "q?", true), ChoiceSuffix(kFruits)),
            LetterIds(tok, 3));
  CallControl control;
  control.deadline = absl::Now() + absl::Milliseconds(30);
  const absl::Time start = absl::Now();
  auto out = backend.Logprobs({group}, 0, control);
  const absl::Duration took = absl::Now() - start;
  CHECK(out.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(took >= absl::Milliseconds(29));
  CHECK(took < absl::Seconds(60));

  control.deadline = absl::Now() + absl::Milliseconds(30);
  auto hs = backend.HiddenStates({group}, {4}, control);
  CHECK(hs.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(backend.prompts_seen() == 0);

  // A passed deadline stops even an undelayed call.
  FakeBackend quick;
  CallControl passed;
  passed.deadline = absl::Now() - absl::Seconds(1);
  CHECK(quick.Logprobs({group}, 0, passed).status().code() ==
        absl::StatusCode::kDeadlineExceeded);
}

TEST_CASE("A delayed call stops when cancelled", "[fake_backend]") {
  // Returning before the 60 s delay is the proof, however late the cancel.
  FakeBackend backend(FakeBackendOptions{.delay_s = 60.0});
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const PromptGroup group =
      Group(tok, Fallback(UserPrefix("x", "q?", true), ChoiceSuffix(kFruits)),
            LetterIds(tok, 3));
  std::atomic<bool> cancelled{false};
  CallControl control;
  control.cancelled = &cancelled;
  std::thread canceller([&cancelled] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    cancelled.store(true);
  });
  const absl::Time start = absl::Now();
  auto out = backend.HiddenStates({group}, {-1}, control);
  const absl::Duration took = absl::Now() - start;
  canceller.join();
  CHECK(out.status().code() == absl::StatusCode::kCancelled);
  CHECK(took < absl::Seconds(60));
}

TEST_CASE("A short delay completes", "[fake_backend]") {
  FakeBackend backend(FakeBackendOptions{.delay_s = 0.05});
  const FakeTokenizer& tok = backend.fake_tokenizer();
  const PromptGroup group =
      Group(tok, Fallback(UserPrefix("x", "q?", true), ChoiceSuffix(kFruits)),
            LetterIds(tok, 3));
  const absl::Time start = absl::Now();
  auto out = backend.Logprobs({group}, 0, CallControl{});
  CHECK(out.ok());
  CHECK(absl::Now() - start >= absl::Milliseconds(50));
}

}  // namespace
}  // namespace mesa_anyjev
