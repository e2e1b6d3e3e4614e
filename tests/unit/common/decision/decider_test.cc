// The Decider on the fake model: levels, priors, the method's properties
// (canonical order, noul flip, L1 keeps the argmax), what is meaningful on the
// fake (raw's position bias flips answers under reversal, L0 removes it; an L2
// head reads classes planted in the hidden state that no readout carries),
// refusals, concurrency and the heads file.
#include "common/decision/decider.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/fake_backend.h"
#include "common/text/fake_tokenizer.h"

namespace mesa_anyjev::decision {
namespace {

using Json = nlohmann::ordered_json;

const std::vector<std::string> kTopics = {"genes", "proteins", "cells",
                                          "viruses"};

// States that name no option: the fake's content is jitter alone, so raw
// answers follow the position bias.
std::vector<std::string> PlainStates(int n, const std::string& tag = "r") {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    out.push_back("Record " + tag + std::to_string(i) + " of a survey");
  }
  return out;
}

// n states, state i about topic i % 4 and labelled with it.
std::pair<std::vector<std::string>, std::vector<int>> AboutTopics(int n) {
  std::vector<std::string> states;
  std::vector<int> labels;
  for (int i = 0; i < n; ++i) {
    states.push_back("About " + kTopics[i % 4] + " #" + std::to_string(i));
    labels.push_back(i % 4);
  }
  return {states, labels};
}

Question Topic(std::vector<std::string> options = kTopics) {
  return *Question::Choice("What is it about?", std::move(options));
}

std::vector<std::string> Reversed(std::vector<std::string> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

// The option each decision picks, by text.
std::vector<std::string> Answers(
    const std::vector<std::vector<Decision>>& decisions) {
  std::vector<std::string> out;
  for (const auto& row : decisions) out.push_back(row[0].answer());
  return out;
}

double FlipRate(Decider& decider, Level level,
                const std::vector<std::string>& states) {
  const auto forward = decider.Decide(states, {Topic()}, level);
  const auto backward =
      decider.Decide(states, {Topic(Reversed(kTopics))}, level);
  REQUIRE(forward.ok());
  REQUIRE(backward.ok());
  const auto a = Answers(*forward);
  const auto b = Answers(*backward);
  int flips = 0;
  for (size_t i = 0; i < a.size(); ++i) flips += a[i] != b[i];
  return static_cast<double>(flips) / static_cast<double>(a.size());
}

TEST_CASE("raw follows the position bias; L0 removes it", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const auto states = PlainStates(40);
  const double raw = FlipRate(decider, Level::kRaw, states);
  const double l0 = FlipRate(decider, Level::kL0, states);
  INFO("flip under reversal: raw " << raw << ", L0 " << l0);
  CHECK(raw >= 0.9);
  CHECK(l0 <= 0.05);
}

TEST_CASE("raw, L0 and what each decision carries", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  const auto raw = decider.Decide({"A study of proteins"}, {q}, Level::kRaw);
  REQUIRE(raw.ok());
  const Decision& d = (*raw)[0][0];
  CHECK(d.level == Level::kRaw);
  CHECK(d.answer() == "proteins");
  CHECK(d.diagnostics.perms.size() == 1);
  CHECK(*d.diagnostics.answer_mass > 0.99);
  CHECK(d.diagnostics.prompt_sha256.size() == 64);
  double sum = 0;
  for (double p : d.probs) sum += p;
  CHECK(sum == Approx(1.0));
  const auto l0 = decider.Decide({"A study of proteins"}, {q}, Level::kL0);
  REQUIRE(l0.ok());
  CHECK((*l0)[0][0].diagnostics.perms.size() == 4);
  CHECK((*l0)[0][0].diagnostics.prior_method == "none");  // 1 state < 8
}

TEST_CASE("the batch prior starts at 8 states", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  const auto seven = decider.Decide(PlainStates(7), {q}, Level::kL0);
  REQUIRE(seven.ok());
  CHECK((*seven)[0][0].diagnostics.prior_method == "none");
  CHECK(!decider.RunningPrior(q).has_value());
  // The 8th state, this batch included, switches it on.
  const auto eighth = decider.Decide({"one more"}, {q}, Level::kL0);
  REQUIRE(eighth.ok());
  CHECK((*eighth)[0][0].diagnostics.prior_method == "batch");
  CHECK((*eighth)[0][0].diagnostics.prior_strength == 0.75);
  CHECK(decider.RunningPrior(q).has_value());
  decider.ResetPrior(q.key());
  CHECK(!decider.RunningPrior(q).has_value());
}

TEST_CASE("running priors are each tenant's own", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  CallControl pipe;
  pipe.tenant = "pipe";
  CallControl curator;
  curator.tenant = "curator";
  // Eight states of one tenant switch its batch prior on, and only its.
  REQUIRE(decider.Decide(PlainStates(8), {q}, Level::kL0, {}, pipe).ok());
  CHECK(decider.RunningPrior(q, "pipe").has_value());
  CHECK_FALSE(decider.RunningPrior(q, "curator").has_value());
  CHECK_FALSE(decider.RunningPrior(q).has_value());
  const auto alone = decider.Decide({"one more"}, {q}, Level::kL0, {}, curator);
  REQUIRE(alone.ok());
  CHECK((*alone)[0][0].diagnostics.prior_method == "none");
  const auto with = decider.Decide({"one more"}, {q}, Level::kL0, {}, pipe);
  REQUIRE(with.ok());
  CHECK((*with)[0][0].diagnostics.prior_method == "batch");
  // A tenant's reset clears its own priors, never another's.
  REQUIRE(decider.Decide(PlainStates(8), {q}, Level::kL0, {}, curator).ok());
  decider.ResetAllPriors("curator");
  CHECK_FALSE(decider.RunningPrior(q, "curator").has_value());
  CHECK(decider.RunningPrior(q, "pipe").has_value());
  decider.ResetPrior(q.key(), "pipe");
  CHECK_FALSE(decider.RunningPrior(q, "pipe").has_value());
}

TEST_CASE("a routed head adapts to each tenant's own states", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const auto [states, labels] = AboutTopics(16);
  REQUIRE(decider.FitHead(Topic(), states, labels).ok());
  const Question reworded = *Question::Choice("Which topic?", kTopics);
  CallControl pipe;
  pipe.tenant = "pipe";
  CallControl curator;
  curator.tenant = "curator";
  // 30 states of one tenant reach adapt_min_n for it alone.
  REQUIRE(
      decider.Decide(PlainStates(30), {reworded}, Level::kL2, {}, pipe).ok());
  const auto other =
      decider.Decide({"one more"}, {reworded}, Level::kL2, {}, curator);
  REQUIRE(other.ok());
  CHECK((*other)[0][0].diagnostics.adapt_n == 1);
  CHECK_FALSE((*other)[0][0].diagnostics.adapted);
  const auto own =
      decider.Decide({"one more"}, {reworded}, Level::kL2, {}, pipe);
  REQUIRE(own.ok());
  CHECK((*own)[0][0].diagnostics.adapt_n == 31);
  CHECK((*own)[0][0].diagnostics.adapted);
  // Each tenant's export carries its own statistics.
  const auto key = reworded.key();
  CHECK(decider.artifacts().Export(false, "pipe")["adaptation"].contains(key));
  CHECK(decider.artifacts().Export(false, "curator")["adaptation"][key]["n"] ==
        1);
}

TEST_CASE("canonical order makes L0 independent of the listing", "[decision]") {
  FakeBackend fake;
  DeciderOptions options;
  options.canonical_order = true;
  options.prior = PriorMode::kNone;  // priors are per key; compare readouts
  for (std::optional<int> budget :
       {std::optional<int>(), std::optional<int>(2)}) {
    options.max_permutations = budget;
    Decider decider(&fake, options);
    const std::vector<std::string> listing = {"genes", "Cells", "proteins",
                                              "cells"};
    const std::vector<std::string> shuffled = {"cells", "proteins", "genes",
                                               "Cells"};
    const auto states = PlainStates(6);
    const auto a = decider.Decide(states, {Topic(listing)}, Level::kL0);
    const auto b = decider.Decide(states, {Topic(shuffled)}, Level::kL0);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    for (size_t s = 0; s < states.size(); ++s) {
      for (size_t i = 0; i < listing.size(); ++i) {
        const size_t j =
            std::find(shuffled.begin(), shuffled.end(), listing[i]) -
            shuffled.begin();
        // Identical prompts; only the final normalisation sums in another
        // order.
        CHECK((*a)[s][0].probs[i] ==
              Approx((*b)[s][0].probs[j]).epsilon(1e-14));
      }
    }
  }
}

TEST_CASE("noul reads both phrasings; its L0 flip is 0", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const auto d =
      decider.Decide({"Some text"}, {Question::Noul("Is it?")}, Level::kL0);
  REQUIRE(d.ok());
  const Decision& noul = (*d)[0][0];
  CHECK(noul.diagnostics.perms ==
        std::vector<std::vector<int>>{{0, 1}, {1, 0}});
  REQUIRE(noul.p_true().has_value());
  CHECK(*noul.p_true() == noul.probs[0]);
  CHECK(*noul.diagnostics.order_flip_l0 == 0.0);
}

TEST_CASE("score is read once, unpermuted, with a value", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const auto d = decider.Decide(
      {"0.75 mentioned"}, {*Question::ScoreBins("How much?", 4)}, Level::kL0);
  REQUIRE(d.ok());
  const Decision& score = (*d)[0][0];
  CHECK(score.diagnostics.perms.size() == 1);
  REQUIRE(score.score_value.has_value());
  double value = 0;
  const std::vector<double> centers = {0.125, 0.375, 0.625, 0.875};
  for (int k = 0; k < 4; ++k) value += score.probs[k] * centers[k];
  CHECK(*score.score_value == Approx(value));
}

TEST_CASE("L1: a frozen prior, a temperature, the argmax kept", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  std::vector<std::string> states;
  std::vector<int> labels;
  for (int i = 0; i < 24; ++i) {
    states.push_back("About " + kTopics[i % 4] + " number " +
                     std::to_string(i));
    labels.push_back(i % 4);
  }
  // Not available before calibration; require names what is missing.
  auto refused = decider.Decide({"x"}, {q}, Level::kL1);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  DecideOptions require;
  require.require = Level::kL1;
  refused = decider.Decide({"x"}, {q}, Level::kAuto, require);
  REQUIRE(absl::IsFailedPrecondition(refused.status()));
  CHECK(refused.status().message().find("L1 artifact") != std::string::npos);

  const auto artifact = decider.Calibrate(q, states, labels);
  REQUIRE(artifact.ok());
  CHECK((*artifact)["method"] == "temperature");
  CHECK((*artifact)["n_calib"] == 24);
  CHECK((*artifact)["prior_method"] == "batch");
  CHECK((*artifact)["prior"].size() == 4);
  const auto l0 = decider.Decide(states, {q}, Level::kL0);
  const auto l1 = decider.Decide(states, {q}, Level::kL1);
  const auto served = decider.Decide(states, {q}, Level::kAuto, require);
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  REQUIRE(served.ok());
  for (size_t s = 0; s < states.size(); ++s) {
    const Decision& d = (*l1)[s][0];
    CHECK(d.level == Level::kL1);
    CHECK(d.diagnostics.prior_method == "frozen:batch");
    CHECK(d.answer_index() == ArgMax(d.diagnostics.l0_probs));
    CHECK((*served)[s][0].level == Level::kL1);
  }
}

TEST_CASE("an L2 head beats L0 on classes planted in the hidden state",
          "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  // The fake plants a unit vector of the state text in dims 26..37 of its
  // last layer. Class = which of the first four of those dims is largest:
  // in the hidden state, absent from every logprob.
  const auto states = PlainStates(200, "h");
  std::vector<int> labels;
  for (const std::string& state : states) {
    auto ids = fake.tokenizer().Encode(state);
    const auto hidden =
        fake.HiddenStates({PromptGroup{*ids, {{}}, {}}}, {4}, {});
    REQUIRE(hidden.ok());
    int best = 0;
    for (int c = 1; c < 4; ++c) {
      if (hidden->values[26 + c] > hidden->values[26 + best]) best = c;
    }
    labels.push_back(best);
  }
  const std::vector<std::string> train(states.begin(), states.begin() + 140);
  const std::vector<std::string> test(states.begin() + 140, states.end());
  const std::vector<int> train_y(labels.begin(), labels.begin() + 140);
  const std::vector<int> test_y(labels.begin() + 140, labels.end());
  const auto artifact = decider.FitHead(q, train, train_y);
  REQUIRE(artifact.ok());
  CHECK((*artifact)["params"]["listing"] == "random");
  const auto l0 = decider.Decide(test, {q}, Level::kL0);
  const auto l2 = decider.Decide(test, {q}, Level::kL2);
  REQUIRE(l0.ok());
  REQUIRE(l2.ok());
  double acc0 = 0;
  double acc2 = 0;
  for (size_t s = 0; s < test.size(); ++s) {
    acc0 += (*l0)[s][0].answer_index() == test_y[s];
    acc2 += (*l2)[s][0].answer_index() == test_y[s];
    CHECK((*l2)[s][0].level == Level::kL2);
    CHECK((*l2)[s][0].diagnostics.head_version.size() == 16);
  }
  acc0 /= static_cast<double>(test.size());
  acc2 /= static_cast<double>(test.size());
  INFO("accuracy: L0 " << acc0 << ", L2 " << acc2);
  CHECK(acc2 >= acc0 + 0.25);
  // auto now serves L2; a reworded question routes to the head.
  const auto reworded = *Question::Choice("Which topic?", kTopics);
  const auto routed = decider.Decide({test[0]}, {reworded}, Level::kAuto);
  REQUIRE(routed.ok());
  CHECK((*routed)[0][0].level == Level::kL2);
  CHECK(!(*routed)[0][0].diagnostics.routed_from.empty());
  // ... unless auto is restricted to exact keys.
  DeciderOptions exact;
  exact.auto_routes_reworded = false;
  Decider strict(&fake, exact);
  REQUIRE(strict.artifacts().Load(decider.artifacts().Export(false)).ok());
  const auto l0_served = strict.Decide({test[0]}, {reworded}, Level::kAuto);
  REQUIRE(l0_served.ok());
  CHECK((*l0_served)[0][0].level == Level::kL0);
  // A call asking for exact heads (as the CLI's do) gets the same from the
  // routing decider: auto is L0 with L0's own numbers, L2 is refused by
  // name, and the exact key is still served at L2.
  DecideOptions exact_call;
  exact_call.exact_heads = true;
  const auto plain_l0 = decider.Decide({test[0]}, {reworded}, Level::kL0);
  const auto auto_exact =
      decider.Decide({test[0]}, {reworded}, Level::kAuto, exact_call);
  REQUIRE(plain_l0.ok());
  REQUIRE(auto_exact.ok());
  CHECK((*auto_exact)[0][0].level == Level::kL0);
  CHECK((*auto_exact)[0][0].diagnostics.routed_from.empty());
  CHECK((*auto_exact)[0][0].probs == (*plain_l0)[0][0].probs);
  const auto l2_exact =
      decider.Decide({test[0]}, {reworded}, Level::kL2, exact_call);
  CHECK(absl::IsFailedPrecondition(l2_exact.status()));
  CHECK(l2_exact.status().message().find("exact key") != std::string::npos);
  const auto own = decider.Decide({test[0]}, {q}, Level::kAuto, exact_call);
  REQUIRE(own.ok());
  CHECK((*own)[0][0].level == Level::kL2);
}

TEST_CASE("refusals name what is wrong", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  auto status = decider.Decide({"x"}, {q}, Level::kL2).status();
  CHECK(absl::IsFailedPrecondition(status));
  CHECK(status.message().find("head") != std::string::npos);
  DecideOptions require;
  require.require = Level::kL1;
  status = decider.Decide({"x"}, {q}, Level::kL0, require).status();
  CHECK(absl::IsInvalidArgument(status));
  auto labelled = Topic();
  REQUIRE(labelled.SetCustomLabels({"A", "B", "C", "DD"}).ok());
  status = decider.Decide({"x"}, {labelled}, Level::kL0).status();
  CHECK(absl::IsInvalidArgument(status));
  CHECK(status.message().find("\"DD\"") != std::string::npos);
}

TEST_CASE("a prompt over the length limit names its state", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  std::vector<std::string> states = PlainStates(4);
  states[2] = "Record " + std::string(4000, 'x');  // one token per x
  CallControl control;
  control.max_prompt_tokens = 1000;
  // Every readout path: one call (raw, L0) and the adaptive waves.
  for (const bool adaptive : {false, true}) {
    for (const Level level : {Level::kRaw, Level::kL0}) {
      DecideOptions options;
      options.adaptive_shifts = adaptive;
      const auto status =
          decider.Decide(states, {Topic()}, level, options, control).status();
      INFO(LevelName(level) << " adaptive " << adaptive);
      CHECK(absl::IsInvalidArgument(status));
      CHECK(absl::StartsWith(status.message(),
                             "states[2]: a decision prompt of "));
    }
  }
  states.erase(states.begin() + 2);
  CHECK(decider.Decide(states, {Topic()}, Level::kL0, {}, control).ok());
}

TEST_CASE("concurrent callers each count once in the batch prior",
          "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const auto d =
            decider.Decide(PlainStates(3, std::to_string(t)), {q}, Level::kL0);
        CHECK(d.ok());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  // 4 threads x 5 calls x 3 states; the prior needs 8: compare with a
  // sequential decider fed the same 60 states.
  Decider sequential(&fake);
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 5; ++i) {
      REQUIRE(
          sequential.Decide(PlainStates(3, std::to_string(t)), {q}, Level::kL0)
              .ok());
    }
  }
  const Matrix a = *decider.RunningPrior(q);
  const Matrix b = *sequential.RunningPrior(q);
  CHECK((a - b).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("export and load keep decisions", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  const auto [states, labels] = AboutTopics(16);
  REQUIRE(decider.Calibrate(q, states, labels).ok());
  REQUIRE(decider.FitHead(q, states, labels).ok());
  for (size_t i = 0; i < states.size(); ++i) {
    REQUIRE(decider.Observe(q, states[i], labels[i]).ok());
  }
  const auto file = decider.artifacts().Export(true);
  CHECK(file["model"] == "fake");
  CHECK(file["heads"].contains(q.key()));
  CHECK(file["observations"][q.key()]["labels"].size() == 16);
  Decider other(&fake);
  const auto loaded = other.artifacts().Load(file);
  REQUIRE(loaded.ok());
  CHECK(*loaded == 2);
  CHECK(other.artifacts().Export(true).dump() == file.dump());
  const auto a = decider.Decide(states, {q}, Level::kL2);
  const auto b = other.Decide(states, {q}, Level::kL2);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)[0][0].diagnostics.head_version ==
        (*b)[0][0].diagnostics.head_version);
  for (size_t s = 0; s < states.size(); ++s) {
    for (int j = 0; j < 4; ++j) {
      CHECK((*a)[s][0].probs[j] == Approx((*b)[s][0].probs[j]).margin(1e-5));
    }
  }
  // Another model's file is refused.
  auto foreign = file;
  foreign["model"] = "Qwen/Qwen3-8B";
  CHECK(absl::IsFailedPrecondition(other.artifacts().Load(foreign).status()));
  // So is a file of the same name but another checkpoint or shape; what a
  // file does not say is not asked (anyjev's files carry no identity).
  CHECK(file["model_identity"] == fake.identity().identity);
  CHECK(file["n_blocks"] == fake.capabilities().n_layers);
  CHECK(file["hidden_size"] == fake.capabilities().hidden_size);
  for (const auto& [field, value, code] :
       {std::tuple<std::string, Json, absl::StatusCode>{
            "model_identity", "0123abcd",
            absl::StatusCode::kFailedPrecondition},
        {"model_identity", 7, absl::StatusCode::kInvalidArgument},
        {"n_blocks", 36, absl::StatusCode::kFailedPrecondition},
        {"n_blocks", "4", absl::StatusCode::kInvalidArgument},
        {"hidden_size", 4096, absl::StatusCode::kFailedPrecondition}}) {
    auto changed = file;
    changed[field] = value;
    const absl::Status status =
        Decider(&fake).artifacts().Load(changed).status();
    CHECK(status.code() == code);
    CHECK(absl::StrContains(status.message(), field));
  }
  auto bare = file;
  for (const char* field : {"model_identity", "n_blocks", "hidden_size"}) {
    bare.erase(field);
  }
  CHECK(Decider(&fake).artifacts().Load(bare).ok());
  // A prior-carrying L1 artifact of another layout is refused.
  auto artifact = file["artifacts"][q.key()];
  CHECK(absl::IsFailedPrecondition(
      other.artifacts().LoadArtifact(Topic(Reversed(kTopics)), artifact)));
  CHECK(other.artifacts().LoadArtifact(q, artifact).ok());
  artifact["method"] = "histogram_binning";
  CHECK(absl::IsInvalidArgument(other.artifacts().LoadArtifact(q, artifact)));
}

TEST_CASE("a head artifact loads for the question it is given", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  const auto [states, labels] = AboutTopics(16);
  const auto fitted = decider.FitHead(q, states, labels);
  REQUIRE(fitted.ok());
  // The entry describes the question it is loaded for (not the text the
  // artifact carries); its question_id is the artifact's.
  Json artifact = *fitted;
  artifact["text"] = "another wording";
  artifact["question_id"] = "from the file";
  Decider other(&fake);
  REQUIRE(other.artifacts().LoadArtifact(q, artifact).ok());
  const Json loaded = other.artifacts().Export(false)["heads"][q.key()];
  CHECK(loaded["text"] == q.text());
  CHECK(loaded["question_id"] == "from the file");
  CHECK(loaded["W"] == (*fitted)["W"]);
  const auto a = decider.Decide(states, {q}, Level::kL2);
  const auto b = other.Decide(states, {q}, Level::kL2);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (size_t s = 0; s < states.size(); ++s) {
    for (int j = 0; j < 4; ++j) {
      CHECK((*a)[s][0].probs[j] == Approx((*b)[s][0].probs[j]).margin(1e-5));
    }
  }
  // Another layout is refused; without a "question", a head of another K
  // or outside the model's blocks is malformed.
  CHECK(absl::IsFailedPrecondition(
      other.artifacts().LoadArtifact(Topic(Reversed(kTopics)), *fitted)));
  Json anywhere = *fitted;
  anywhere.erase("question");
  const Question three = Topic({"genes", "proteins", "cells"});
  const absl::Status k3 = other.artifacts().LoadArtifact(three, anywhere);
  CHECK(absl::IsInvalidArgument(k3));
  CHECK(absl::StrContains(k3.message(), "K=3"));
  anywhere["layer_abs"] = 99;
  const absl::Status deep = other.artifacts().LoadArtifact(q, anywhere);
  CHECK(absl::IsInvalidArgument(deep));
  CHECK(absl::StrContains(deep.message(), "layer_abs"));
  CHECK_FALSE(other.artifacts().HasHead(three.key()));
}

// The fake model, keeping the prompts of every Logprobs call as text.
class RecordingBackend final : public ForwardingBackend {
 public:
  RecordingBackend() : ForwardingBackend(&fake_) {}

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    std::vector<std::string> prompts;
    for (const PromptGroup& group : groups) {
      const std::string prefix = *tokenizer().Decode(group.prefix);
      for (const auto& suffix : group.suffixes) {
        prompts.push_back(prefix + *tokenizer().Decode(suffix));
      }
    }
    calls.push_back(std::move(prompts));
    return ForwardingBackend::Logprobs(groups, top_k, control);
  }

  std::vector<std::vector<std::string>> calls;

 private:
  FakeBackend fake_;
};

bool AllStates(const std::vector<std::string>& prompts) {
  return std::all_of(prompts.begin(), prompts.end(), [](const auto& p) {
    return absl::StrContains(p, "State:\nRecord ");
  });
}

TEST_CASE("content-free probes are read in a call of their own, once",
          "[decision]") {
  RecordingBackend backend;
  DeciderOptions options;
  options.prior = PriorMode::kContentFree;
  Decider decider(&backend, options);
  const Question four = Topic();
  const Question three = Topic({"genes", "proteins", "cells"});
  REQUIRE(decider.Decide(PlainStates(2), {four, three}, Level::kL0).ok());
  // The states' prompts in one call; every probe of both questions in the
  // next, none beside a state.
  REQUIRE(backend.calls.size() == 2);
  CHECK(backend.calls[0].size() == 2 * 4 + 2 * 3);
  CHECK(AllStates(backend.calls[0]));
  CHECK(backend.calls[1].size() == 3 * 4 + 3 * 3);
  for (const std::string& probe : backend.calls[1]) {
    CHECK_FALSE(absl::StrContains(probe, "Record "));
  }
  // Kept per listing: the next call reads the states alone.
  backend.calls.clear();
  REQUIRE(decider.Decide(PlainStates(2, "n"), {four, three}, Level::kL0).ok());
  REQUIRE(backend.calls.size() == 1);
  CHECK(AllStates(backend.calls[0]));
  // The rotation budget reads its question's probes first, on their own.
  backend.calls.clear();
  DecideOptions adaptive;
  adaptive.adaptive_shifts = true;
  const Question reworded = *Question::Choice("Which topic?", kTopics);
  REQUIRE(
      decider.Decide(PlainStates(2), {reworded}, Level::kL0, adaptive).ok());
  REQUIRE(backend.calls.size() >= 2);
  CHECK(backend.calls[0].size() == 3 * 4);
  CHECK_FALSE(AllStates({backend.calls[0][0]}));
  for (size_t c = 1; c < backend.calls.size(); ++c) {
    CHECK(AllStates(backend.calls[c]));
  }
}

TEST_CASE("a call cut at max_prompts_per_call keeps a state's prompts together",
          "[decision]") {
  RecordingBackend backend;
  DeciderOptions options;
  options.max_prompts_per_call = 7;  // one state's 4 + 3 shifts
  Decider decider(&backend, options);
  const Question four = Topic();
  const Question three = Topic({"genes", "proteins", "cells"});
  REQUIRE(decider.Decide(PlainStates(3), {four, three}, Level::kL0).ok());
  REQUIRE(backend.calls.size() == 3);
  for (size_t c = 0; c < backend.calls.size(); ++c) {
    INFO(c);
    CHECK(backend.calls[c].size() == 7);
    const std::string state = "State:\nRecord r" + std::to_string(c) + " ";
    for (const std::string& prompt : backend.calls[c]) {
      CHECK(absl::StrContains(prompt, state));
    }
  }
}

TEST_CASE("observe fits at 30, 60, 120", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  std::vector<int> fits;
  for (int i = 0; i < 125; ++i) {
    const auto art = decider.Observe(
        q, "About " + kTopics[i % 4] + " obs " + std::to_string(i), i % 4);
    REQUIRE(art.ok());
    if (art->has_value()) fits.push_back(i + 1);
  }
  CHECK(fits == std::vector<int>{30, 60, 120});
}

// The fake model, failing every Logprobs call that reads Yes/No labels (a
// noul), so a Decide can fail after its other questions were read.
class FailingNoul final : public ForwardingBackend {
 public:
  FailingNoul() : ForwardingBackend(&fake_) {}

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    const auto& tok = static_cast<const text::FakeTokenizer&>(tokenizer());
    for (const PromptGroup& group : groups) {
      for (const text::TokenId id : group.label_ids) {
        if (fail && id == tok.LabelId("Yes")) {
          return absl::InternalError("injected model error");
        }
      }
    }
    return ForwardingBackend::Logprobs(groups, top_k, control);
  }

  bool fail = true;

 private:
  FakeBackend fake_;
};

TEST_CASE("a Decide that fails part-way leaves the running priors as they were",
          "[decision]") {
  FailingNoul backend;
  Decider decider(&backend);
  const Question topic = Topic();
  const Question noul = Question::Noul("Is it about cells?");
  DecideOptions adaptive;
  adaptive.adaptive_shifts = true;  // the topic runs first, on its own path
  for (const DecideOptions& options : {DecideOptions{}, adaptive}) {
    const auto failed =
        decider.Decide(PlainStates(8), {topic, noul}, Level::kL0, options);
    REQUIRE_FALSE(failed.ok());
    CHECK_THAT(std::string(failed.status().message()),
               Catch::Matchers::Contains("injected"));
    CHECK_FALSE(decider.RunningPrior(topic).has_value());
  }
  backend.fail = false;
  REQUIRE(decider.Decide(PlainStates(8), {topic, noul}, Level::kL0).ok());
  CHECK(decider.RunningPrior(topic).has_value());
  CHECK(decider.RunningPrior(noul).has_value());
}

TEST_CASE("running priors are kept per listing", "[decision]") {
  FakeBackend fake;
  Decider decider(&fake);
  const Question q = Topic();
  DecideOptions two;
  two.max_permutations = 2;
  DecideOptions canonical;
  canonical.canonical_order = true;
  for (const DecideOptions& options : {two, canonical}) {
    const auto decided =
        decider.Decide(PlainStates(8), {q}, Level::kL0, options);
    REQUIRE(decided.ok());
    CHECK((*decided)[0][0].diagnostics.prior_method == "batch");
  }
  // Neither listing's readouts reached the prior of the default one.
  CHECK_FALSE(decider.RunningPrior(q).has_value());
  const auto seven = decider.Decide(PlainStates(7, "d"), {q}, Level::kL0);
  REQUIRE(seven.ok());
  CHECK((*seven)[0][0].diagnostics.prior_method == "none");
  // ResetPrior drops every listing of the key.
  decider.ResetPrior(q.key());
  const auto again = decider.Decide(PlainStates(7, "e"), {q}, Level::kL0, two);
  REQUIRE(again.ok());
  CHECK((*again)[0][0].diagnostics.prior_method == "none");
}

TEST_CASE("carried priors: the caller's table serves, the decider's is kept",
          "[decision]") {
  FakeBackend fake;
  Decider carried_decider(&fake);
  Decider shared(&fake);
  const Question q = Topic();
  PriorTable run;
  DecideOptions carry;
  carry.carried_priors = &run;
  // Two calls of 5 states: the second crosses 8 and uses the batch prior,
  // exactly as on a decider that keeps the priors itself.
  for (const std::string tag : {"a", "b"}) {
    const auto with =
        carried_decider.Decide(PlainStates(5, tag), {q}, Level::kL0, carry);
    const auto own = shared.Decide(PlainStates(5, tag), {q}, Level::kL0);
    REQUIRE(with.ok());
    REQUIRE(own.ok());
    for (size_t s = 0; s < with->size(); ++s) {
      CHECK((*with)[s][0].probs == (*own)[s][0].probs);
      CHECK((*with)[s][0].diagnostics.prior_method ==
            (*own)[s][0].diagnostics.prior_method);
    }
  }
  REQUIRE(run.size() == 1);
  CHECK(absl::StartsWith(run.begin()->first, q.key() + "|"));
  CHECK(run.begin()->second.n == 10);
  CHECK_FALSE(carried_decider.RunningPrior(q).has_value());
  // Another decider given the same table answers the same: routing-free.
  Decider elsewhere(&fake);
  PriorTable copy = run;
  DecideOptions carry_copy;
  carry_copy.carried_priors = &copy;
  const auto there =
      elsewhere.Decide(PlainStates(3, "c"), {q}, Level::kL0, carry_copy);
  const auto here = shared.Decide(PlainStates(3, "c"), {q}, Level::kL0);
  REQUIRE(there.ok());
  REQUIRE(here.ok());
  CHECK((*there)[0][0].probs == (*here)[0][0].probs);
  CHECK((*there)[0][0].diagnostics.prior_method == "batch");
}

TEST_CASE("a carried accumulator is checked before it is used", "[decision]") {
  const std::vector<double> ok = {1.0, 2.0, 0.5, 0.5};
  CHECK(MakePriorAccumulator("p", 2, 2, ok.data(), 4, 3).ok());
  auto message = [&](int64_t shifts, int64_t k, const std::vector<double>& v,
                     int64_t n) {
    return std::string(MakePriorAccumulator("priors[0]", shifts, k, v.data(),
                                            static_cast<int64_t>(v.size()), n)
                           .status()
                           .message());
  };
  CHECK(message(2, 3, ok, 3) == "priors[0]: sum has 4 values; shifts * k = 6");
  CHECK(message(0, 4, {}, 3) == "priors[0]: shifts=0 is outside [1, 256]");
  CHECK(message(1, 300, ok, 3) == "priors[0]: k=300 is outside [1, 256]");
  CHECK(message(2, 2, ok, 0) == "priors[0]: n=0 is outside [1, 2^53]");
  CHECK(absl::StrContains(message(2, 2, {1, 5, 0, 0}, 3),
                          "sum[1]=5 is not a sum of n=3 probabilities"));
  CHECK(absl::StrContains(message(2, 2, {1, NAN, 0, 0}, 3), "sum[1]=nan"));
  CHECK(absl::StrContains(message(2, 2, {-1, 0, 0, 0}, 3), "sum[0]=-1"));
}

}  // namespace
}  // namespace mesa_anyjev::decision
