// Prompt groups: the shifts of one state share a prefix (one group), calls
// are cut at max_prompts_per_call, a prompt whose cut would change its
// tokens goes alone, and results come back in prompt order.
#include "common/decision/prompt_scorer.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/fake_backend.h"

namespace mesa_anyjev::decision {
namespace {

// The fake model, recording the groups of every call.
class Recording final : public ForwardingBackend {
 public:
  Recording() : ForwardingBackend(&fake_) {}

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    calls.push_back(groups);
    return ForwardingBackend::Logprobs(groups, top_k, control);
  }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override {
    calls.push_back(groups);
    return ForwardingBackend::HiddenStates(groups, layers, control);
  }

  std::vector<std::vector<PromptGroup>> calls;

 private:
  FakeBackend fake_;
};

TEST_CASE("prompt groups share prefixes and keep prompt order", "[decision]") {
  Recording backend;
  const text::FakeTokenizer& tok =
      static_cast<const text::FakeTokenizer&>(backend.tokenizer());
  const std::vector<text::TokenId> ids = {tok.LabelId("A"), tok.LabelId("B")};
  std::vector<text::ChatParts> prompts;
  for (const char* state : {"one", "two"}) {
    for (const char* shift : {"A. x\nB. y\n", "A. y\nB. x\n"}) {
      prompts.push_back(
          {std::string("State:\n") + state + "\n\nQuestion: q\nOptions:\n",
           shift});
    }
  }
  PromptScorer scorer(&backend, /*max_prompts_per_call=*/3);
  const auto lps = scorer.Logprobs(prompts, {ids, ids, ids, ids}, {});
  REQUIRE(lps.ok());
  // Two groups of two; the cap of 3 prompts splits the second group.
  REQUIRE(backend.calls.size() == 2);
  CHECK(backend.calls[0].size() == 2);
  CHECK(backend.calls[0][0].suffixes.size() == 2);
  CHECK(backend.calls[0][1].suffixes.size() == 1);
  CHECK(backend.calls[1][0].suffixes.size() == 1);
  CHECK(backend.calls[0][1].prefix == backend.calls[1][0].prefix);
  // In prompt order: each equals the prompt scored on its own.
  REQUIRE(lps->size() == 4);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto alone =
        PromptScorer(&backend, 1).Logprobs({prompts[i]}, {ids}, {});
    REQUIRE(alone.ok());
    CHECK((*alone)[0] == (*lps)[i]);
  }
  CHECK((*lps)[0] != (*lps)[1]);

  // A cut inside a label ("Y" | "es" would tokenise as "Yes"): alone.
  backend.calls.clear();
  const auto merged = scorer.Logprobs({{"Answer Y", "es or No."}}, {ids}, {});
  REQUIRE(merged.ok());
  REQUIRE(backend.calls.size() == 1);
  CHECK(backend.calls[0][0].suffixes ==
        std::vector<std::vector<text::TokenId>>{{}});
  CHECK(backend.calls[0][0].prefix == *tok.Encode("Answer Yes or No."));
}

TEST_CASE("prompt groups go state-major, each prompt back in its place",
          "[decision]") {
  Recording backend;
  const text::FakeTokenizer& tok =
      static_cast<const text::FakeTokenizer&>(backend.tokenizer());
  const std::vector<text::TokenId> ids = {tok.LabelId("A"), tok.LabelId("B")};
  const std::string b = "State:\nb\n\nQuestion: q\nOptions:\n";
  const std::string a = "State:\na\n\nQuestion: q\nOptions:\n";
  // b's questions come first and a lone prompt sits between them.
  const std::vector<text::ChatParts> prompts = {{b, "A. x\nB. y\n"},
                                                {a, "A. x\nB. y\n"},
                                                {"Answer Y", "es or No."},
                                                {b, "A. y\nB. x\n"},
                                                {a, ""}};
  PromptScorer scorer(&backend, /*max_prompts_per_call=*/256);
  const auto lps = scorer.Logprobs(prompts, {ids, ids, ids, ids, ids}, {});
  REQUIRE(lps.ok());
  // Groups sorted by their prefix tokens, ties in order of first appearance:
  // "Answer Yes or No." < a's (shared, then alone) < b's.
  REQUIRE(backend.calls.size() == 1);
  const auto& call = backend.calls[0];
  REQUIRE(call.size() == 4);
  CHECK(call[0].prefix == *tok.Encode("Answer Yes or No."));
  CHECK(call[1].prefix == *tok.Encode(a));
  CHECK(call[1].suffixes.size() == 1);
  CHECK(call[2].prefix == *tok.Encode(a));
  CHECK(call[2].suffixes == std::vector<std::vector<text::TokenId>>{{}});
  CHECK(call[3].prefix == *tok.Encode(b));
  CHECK(call[3].suffixes.size() == 2);
  REQUIRE(lps->size() == prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO(i);
    const auto alone =
        PromptScorer(&backend, 1).Logprobs({prompts[i]}, {ids}, {});
    REQUIRE(alone.ok());
    CHECK((*alone)[0] == (*lps)[i]);
  }
}

TEST_CASE("prompt limits: each prompt's length and the round's tokens",
          "[decision]") {
  Recording backend;
  const text::Tokenizer& tok = backend.tokenizer();
  const std::string state = "State:\none\n\nQuestion: q\nOptions:\n";
  const std::vector<text::ChatParts> prompts = {{state, "A. x\nB. y\n"},
                                                {state, "A. y\nB. x\n"},
                                                {"Answer Y", "es or No."}};
  const std::vector<std::vector<text::TokenId>> no_labels(prompts.size());
  const size_t prefix = tok.Encode(state)->size();
  const size_t suffix = tok.Encode("A. x\nB. y\n")->size();
  const size_t alone = tok.Encode("Answer Yes or No.")->size();
  PromptScorer scorer(&backend, 256);

  SECTION("a round charges each group's prefix once and every suffix") {
    TokenBudget budget;
    CallControl control;
    control.budget = &budget;
    REQUIRE(scorer.Logprobs(prompts, no_labels, control).ok());
    CHECK(budget.used == static_cast<int64_t>(prefix + 2 * suffix + alone));
    budget.limit = budget.used + 1;
    budget.limit_name = "limits.max_call_tokens";
    const auto over = scorer.Logprobs(prompts, no_labels, control);
    CHECK(over.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(over.status().message() ==
          absl::StrCat("the call's prompts come to more than "
                       "limits.max_call_tokens=",
                       budget.limit, " tokens (", budget.used.load(),
                       " so far)"));
  }
  SECTION("a prompt over max_prompt_tokens is refused, named by its length") {
    CallControl control;
    control.max_prompt_tokens = static_cast<int64_t>(prefix + suffix);
    REQUIRE(scorer.Logprobs(prompts, no_labels, control).ok());
    control.max_prompt_tokens -= 1;
    const auto over = scorer.Logprobs(prompts, no_labels, control);
    CHECK(over.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(over.status().message() ==
          absl::StrCat("a decision prompt of ", prefix + suffix,
                       " tokens exceeds limits.max_prompt_tokens=",
                       prefix + suffix - 1, " (shorten the state)"));
    // Told which state each prompt renders, the refusal names it.
    const auto named = scorer.Logprobs(prompts, no_labels, control, {4, 4, -1});
    CHECK(named.status().message() ==
          absl::StrCat("states[4]: ", over.status().message()));
  }
  SECTION("a cancelled call stops while its prompts are built") {
    std::atomic<bool> cancelled{true};
    CallControl control;
    control.cancelled = &cancelled;
    const auto stopped = scorer.Logprobs(prompts, no_labels, control);
    CHECK(stopped.status().code() == absl::StatusCode::kCancelled);
    CHECK(backend.calls.empty());
  }
}

TEST_CASE("hidden states come back per prompt and layer", "[decision]") {
  Recording backend;
  PromptScorer scorer(&backend, 256);
  const auto feats =
      scorer.HiddenStates({{"State:\na\n\nQuestion: q\n", "Answer Yes or No."},
                           {"State:\nb\n\nQuestion: q\n", "Answer Yes or No."}},
                          {2, 4}, {});
  REQUIRE(feats.ok());
  REQUIRE(feats->size() == 2);
  CHECK((*feats)[0].rows() == 2);
  CHECK((*feats)[1].cols() == FakeBackend::kHiddenSize);
  CHECK(((*feats)[1].row(0) - (*feats)[1].row(1)).norm() > 0.1);
}

}  // namespace
}  // namespace mesa_anyjev::decision
