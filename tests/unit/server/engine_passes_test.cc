// The engine over a pass runner, without a model: a runner that answers
// each output row from the row's own token and position, so every call's
// answer can be checked against its own prompts whatever passes its work
// was planned into. Interactive work planned first, tenants' shares,
// a caller stopped mid-way dropped alone, a failed pass ending only its
// calls, a lost device ending the engine's service (the observer told
// once), the runner bound to the engine thread, and the fault plan's hold.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/status/status_macros.h"
#include "server/engine/engine.h"
#include "server/engine/pass_loop.h"
#include "server/model/device_fault.h"

namespace mesa_anyjev::engine {
namespace {

// Each output row's value: its last token and its position, and per label
// the label id (logprobs), or per layer the layer (hidden states).
float LabelValue(int64_t token, int64_t position, int64_t label) {
  return static_cast<float>(token * 1000 + position * 10 + label);
}
float HiddenValue(int64_t token, int64_t position, int32_t layer, int64_t h) {
  return static_cast<float>(token * 1000 + position * 10 + layer + h * 0.5);
}

constexpr int32_t kHidden = 2;

class FakeRunner final : public model::PassRunner {
 public:
  // Runs first in every pass, on the engine thread (block, fail).
  std::function<absl::Status(const model::PassPlan&)> before;
  std::thread::id bound, ran;
  std::mutex mu;
  std::vector<int64_t> pass_tokens;

  void BindThread() override { bound = std::this_thread::get_id(); }

  absl::StatusOr<model::PassOutput> RunPass(
      const model::PassPlan& plan, std::optional<InjectedFault>) override {
    ran = std::this_thread::get_id();
    if (before) {
      RETURN_IF_ERROR(before(plan));
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      pass_tokens.push_back(static_cast<int64_t>(plan.arrays.tokens.size()));
    }
    const model::PassArrays& a = plan.arrays;
    model::PassOutput out;
    for (size_t r = 0; r < a.rows.size(); ++r) {
      const size_t row = static_cast<size_t>(a.rows[r]);
      const int64_t token = a.tokens[row], position = a.positions[row];
      if (plan.read.logprobs) {
        for (int64_t k = 0; k < a.label_width; ++k) {
          out.labels.push_back(
              LabelValue(token, position,
                         a.labels[r * static_cast<size_t>(a.label_width) +
                                  static_cast<size_t>(k)]));
        }
        for (int32_t k = 0; k < plan.read.top_k; ++k) {
          out.top_values.push_back(static_cast<float>(-k));
          out.top_ids.push_back(token + k);
        }
      } else {
        for (int32_t layer : plan.read.layers) {
          for (int64_t h = 0; h < kHidden; ++h) {
            out.hidden.push_back(HiddenValue(token, position, layer, h));
          }
        }
      }
    }
    return out;
  }
};

struct Recorder : EngineObserver {
  std::mutex mu;
  std::vector<PassRecord> passes;
  std::vector<absl::Status> lost;
  std::vector<std::string> notes;
  std::thread::id lost_on;
  void OnPass(const PassRecord& pass) override {
    std::lock_guard<std::mutex> lock(mu);
    passes.push_back(pass);
  }
  void OnDeviceLost(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu);
    lost.push_back(status);
    lost_on = std::this_thread::get_id();
  }
  void OnNote(const std::string& line) override {
    std::lock_guard<std::mutex> lock(mu);
    notes.push_back(line);
  }
};

// Waits for what the recorder saw to satisfy `seen` (an event: no timing
// window; a test that never sees it is ended by ctest's timeout).
template <typename Seen>
void WaitFor(Recorder& recorder, Seen seen) {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(recorder.mu);
      if (seen()) return;
    }
    std::this_thread::yield();
  }
}

// A state's questions: one group per question, `suffixes` suffixes each,
// the state's tokens (seeded by `state`) as the prefix.
std::vector<PromptGroup> Questions(int state, int questions, int suffixes,
                                   int prefix_tokens = 20) {
  std::vector<PromptGroup> groups;
  for (int q = 0; q < questions; ++q) {
    PromptGroup g;
    for (int t = 0; t < prefix_tokens; ++t) g.prefix.push_back(100 * state + t);
    g.prefix.push_back(5000 + q);
    for (int s = 0; s < suffixes; ++s) {
      g.suffixes.push_back({7000 + 10 * q + s, 8000 + s});
    }
    g.label_ids = {1, 2, static_cast<TokenId>(3 + q)};
    groups.push_back(std::move(g));
  }
  return groups;
}

// A call of `groups` questions each about a state of its own (no prefix
// shared, so every group costs the same 25 tokens).
std::vector<PromptGroup> States(int first, int groups) {
  std::vector<PromptGroup> out;
  for (int g = 0; g < groups; ++g) out.push_back(Questions(first + g, 1, 2)[0]);
  return out;
}

// What a call's answer must be, from its own prompts.
void CheckLogprobs(const std::vector<PromptGroup>& groups,
                   const absl::StatusOr<ForwardOutput>& out, int32_t top_k) {
  REQUIRE(out.ok());
  const auto& rows = std::get<GroupLogprobs>(*out);
  REQUIRE(rows.size() == groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    REQUIRE(rows[g].size() == groups[g].suffixes.size());
    for (size_t s = 0; s < groups[g].suffixes.size(); ++s) {
      const std::vector<TokenId>& suffix = groups[g].suffixes[s];
      const int64_t last =
          suffix.empty() ? groups[g].prefix.back() : suffix.back();
      const int64_t position =
          static_cast<int64_t>(groups[g].prefix.size() + suffix.size()) - 1;
      const PromptLogprobs& row = rows[g][s];
      REQUIRE(row.label_logprobs.size() == groups[g].label_ids.size());
      for (size_t k = 0; k < groups[g].label_ids.size(); ++k) {
        CHECK(row.label_logprobs[k] ==
              LabelValue(last, position, groups[g].label_ids[k]));
      }
      REQUIRE(row.top.size() == static_cast<size_t>(top_k));
      for (int32_t k = 0; k < top_k; ++k) CHECK(row.top[k].id == last + k);
      CHECK(row.n_tokens == position + 1);
    }
  }
}

Caller As(const std::string& tenant, Priority priority) {
  return Caller(absl::InfiniteFuture(), nullptr, tenant, priority);
}

struct Answers {
  std::mutex mu;
  std::map<int, absl::StatusOr<ForwardOutput>> by_id;
  std::map<int, absl::Notification> done;

  ForwardJob Job(int id, std::vector<PromptGroup> groups, Caller caller = {},
                 ForwardTask task = LogprobsTask{}) {
    done[id];
    return ForwardJob{std::move(task), std::move(groups), std::move(caller),
                      [this, id](absl::StatusOr<ForwardOutput> out) {
                        {
                          std::lock_guard<std::mutex> lock(mu);
                          by_id.emplace(id, std::move(out));
                        }
                        done[id].Notify();
                      }};
  }
};

struct Bench {
  FakeRunner runner;
  Recorder recorder;
  std::unique_ptr<Engine> engine;

  explicit Bench(int64_t budget = 1000, std::optional<FaultPlan> faults = {},
                 int32_t capacity = 64,
                 const std::function<void(PassLoopOptions&)>& tune = {}) {
    EngineOptions options;
    options.limits.capacity = capacity;
    engine = std::make_unique<Engine>(options, &recorder);
    PassLoopOptions loop;
    loop.kv = {512, 4, 64};
    loop.batch_tokens = budget;
    loop.n_layers = 4;
    loop.hidden_size = kHidden;
    loop.vocab_size = 100000;
    loop.faults = std::move(faults);
    if (tune) tune(loop);
    engine->SetLoop(std::make_unique<PassLoop>(&runner, loop, &recorder));
  }
};

// Blocks the runner's first pass until released, so that calls submitted
// meanwhile are all held when the next pass is planned.
struct Blocker {
  absl::Notification running, release;
  std::atomic<bool> blocked{false};
  void Install(FakeRunner& runner) {
    runner.before = [this](const model::PassPlan&) {
      if (!blocked.exchange(true)) {
        running.Notify();
        release.WaitForNotification();
      }
      return absl::OkStatus();
    };
  }
};

// The runner's first pass (a pipeline's call) held by `blocker` (which
// outlives the engine's passes) while four more of the pipeline's calls
// (100 tokens each) and then `question`, the curator's, are submitted;
// then released.
void QueueBehindARunningPass(Bench& bench, Blocker& blocker, Answers& answers,
                             const std::vector<PromptGroup>& question) {
  blocker.Install(bench.runner);
  bench.engine->Start();
  REQUIRE(bench.engine
              ->TrySubmit(answers.Job(0, Questions(0, 1, 1),
                                      As("pipeline", Priority::kBatch)))
              .ok());
  blocker.running.WaitForNotification();
  for (int c = 1; c <= 4; ++c) {
    REQUIRE(bench.engine
                ->TrySubmit(answers.Job(c, Questions(c, 4, 2),
                                        As("pipeline", Priority::kBatch)))
                .ok());
  }
  REQUIRE(bench.engine
              ->TrySubmit(answers.Job(9, question,
                                      As("curator", Priority::kInteractive)))
              .ok());
  blocker.release.Notify();
}

TEST_CASE("every call gets its own rows, whatever passes its work shared",
          "[engine]") {
  Bench bench(/*budget=*/60);
  bench.engine->Start();
  Answers answers;
  std::vector<std::vector<PromptGroup>> calls;
  for (int c = 0; c < 6; ++c) calls.push_back(Questions(c % 3, 1 + c % 2, 3));
  for (int c = 0; c < 6; ++c) {
    REQUIRE(bench.engine
                ->TrySubmit(answers.Job(c, calls[c], {},
                                        LogprobsTask{c % 2 == 0 ? 0 : 2}))
                .ok());
  }
  PromptGroup whole;  // prompts with no prefix: each a prefix of its own
  whole.suffixes = {{1, 2, 3}, {4, 5}};
  whole.label_ids = {9};
  REQUIRE(bench.engine->TrySubmit(answers.Job(6, {whole})).ok());
  const std::vector<PromptGroup> deep = Questions(9, 2, 2);
  REQUIRE(bench.engine
              ->TrySubmit(answers.Job(7, deep, {}, HiddenStatesTask{{0, 2, 4}}))
              .ok());
  bench.engine->Stop();
  for (int c = 0; c < 6; ++c) {
    INFO(c);
    CheckLogprobs(calls[c], answers.by_id.at(c), c % 2 == 0 ? 0 : 2);
  }
  CheckLogprobs({whole}, answers.by_id.at(6), 0);
  const auto& hidden = std::get<HiddenStatesResult>(*answers.by_id.at(7));
  CHECK(hidden.n_prompts == 4);
  CHECK(hidden.layers == std::vector<int32_t>{0, 2, 4});
  for (size_t g = 0; g < 2; ++g) {
    for (size_t s = 0; s < 2; ++s) {
      const size_t p = g * 2 + s;
      const int64_t position = static_cast<int64_t>(deep[g].prefix.size()) + 1;
      for (size_t l = 0; l < 3; ++l) {
        for (int64_t h = 0; h < kHidden; ++h) {
          CHECK(hidden.values[(p * 3 + l) * kHidden + static_cast<size_t>(h)] ==
                HiddenValue(deep[g].suffixes[s].back(), position,
                            hidden.layers[l], h));
        }
      }
    }
  }
  // Full passes: none over the budget but a part-prefix's, and work of
  // several calls shared one.
  bool shared = false;
  for (const PassRecord& p : bench.recorder.passes) {
    shared = shared || p.shares.size() > 1;
  }
  CHECK(shared);
}

TEST_CASE("interactive work rides in the next pass, before batch work",
          "[engine]") {
  Bench bench(/*budget=*/80);
  Blocker blocker;
  Answers answers;
  const std::vector<PromptGroup> question = Questions(9, 1, 2);
  QueueBehindARunningPass(bench, blocker, answers, question);
  answers.done[9].WaitForNotification();
  bench.engine->Stop();
  CheckLogprobs(question, answers.by_id.at(9), 0);
  // The pass after the one that was running began with the curator's
  // question, and batch work filled the rest of it.
  REQUIRE(bench.recorder.passes.size() >= 2);
  const PassRecord& next = bench.recorder.passes[1];
  REQUIRE(!next.shares.empty());
  CHECK(next.shares.front().tenant == "curator");
  CHECK(next.shares.front().priority == Priority::kInteractive);
  CHECK(next.shares.back().tenant == "pipeline");
}

TEST_CASE(
    "passes after one with interactive work stay short while batch work "
    "leads them, then are full again",
    "[engine]") {
  for (const int32_t after : {0, 2}) {
    CAPTURE(after);
    Bench bench(/*budget=*/80, {}, 64, [&](PassLoopOptions& loop) {
      loop.interactive_pass_tokens = 30;
      loop.short_passes_after_interactive = after;
    });
    Blocker blocker;
    Answers answers;
    QueueBehindARunningPass(bench, blocker, answers, Questions(9, 1, 2));
    answers.done[4].WaitForNotification();
    bench.engine->Stop();
    const std::vector<PassRecord>& passes = bench.recorder.passes;
    REQUIRE(passes.size() >= static_cast<size_t>(3 + after));
    // The curator's pass is short; the next `after` passes, batch work
    // alone, too; then the budget is full again.
    CHECK(passes[1].shares.front().tenant == "curator");
    for (int p = 1; p <= 1 + after; ++p) {
      CAPTURE(p);
      CHECK(passes[static_cast<size_t>(p)].tokens <= 30);
    }
    CHECK(passes[static_cast<size_t>(2 + after)].tokens > 30);
  }
}

TEST_CASE("two tenants share passes by tokens, not by calls held", "[engine]") {
  Bench bench(/*budget=*/200);
  Blocker blocker;
  blocker.Install(bench.runner);
  bench.engine->Start();
  Answers answers;
  REQUIRE(bench.engine->TrySubmit(answers.Job(0, Questions(0, 1, 1))).ok());
  blocker.running.WaitForNotification();
  int id = 1;
  for (int c = 0; c < 8; ++c, ++id) {
    REQUIRE(bench.engine
                ->TrySubmit(answers.Job(id, States(10 * id, 6),
                                        As("wide", Priority::kBatch)))
                .ok());
  }
  for (int c = 0; c < 2; ++c, ++id) {
    REQUIRE(bench.engine
                ->TrySubmit(answers.Job(id, States(10 * id, 6),
                                        As("narrow", Priority::kBatch)))
                .ok());
  }
  blocker.release.Notify();
  answers.done[id - 1].WaitForNotification();
  bench.engine->Stop();
  // While both held work, their tokens stayed equal within two groups'
  // worth, though one held four times the calls.
  int64_t wide = 0, narrow = 0;
  for (size_t p = 1; p < bench.recorder.passes.size(); ++p) {
    const auto& shares = bench.recorder.passes[p].shares;
    if (std::none_of(shares.begin(), shares.end(),
                     [](const auto& s) { return s.tenant == "narrow"; })) {
      break;  // narrow's work is done
    }
    for (const PassRecord::Share& s : shares) {
      (s.tenant == "wide" ? wide : narrow) += s.tokens;
    }
  }
  CHECK(narrow >= 2 * 6 * 25 - 50);
  CHECK(std::abs(wide - narrow) <= 50);
}

TEST_CASE(
    "a caller that stops is dropped alone; a failed pass ends only its calls",
    "[engine]") {
  Bench bench(/*budget=*/40);
  std::atomic<bool> gone{false};
  std::atomic<int> passes{0};
  bench.runner.before = [&](const model::PassPlan&) -> absl::Status {
    const int n = ++passes;
    if (n == 2) gone.store(true);  // caller 1 leaves during the second pass
    if (n == 4) return absl::ResourceExhaustedError("out of memory (a test's)");
    return absl::OkStatus();
  };
  Answers answers;
  REQUIRE(bench.engine
              ->TrySubmit(answers.Job(1, States(10, 4),
                                      {absl::InfiniteFuture(), &gone}))
              .ok());
  REQUIRE(bench.engine->TrySubmit(answers.Job(2, States(20, 4))).ok());
  bench.engine->Start();
  bench.engine->Stop();
  CHECK(absl::IsCancelled(answers.by_id.at(1).status()));
  // Call 2's work was in the fourth pass, which failed: it ends with the
  // pass's status; later calls would run.
  CHECK(absl::IsResourceExhausted(answers.by_id.at(2).status()));
}

TEST_CASE(
    "a lost device ends the engine's service, told once, on the engine thread",
    "[engine]") {
  Bench bench(/*budget=*/40);
  bench.runner.before = [](const model::PassPlan&) {
    return model::DeviceLostError("an illegal memory access (a test's)");
  };
  bench.engine->Start();
  Answers answers;
  REQUIRE(bench.engine->TrySubmit(answers.Job(1, Questions(1, 1, 1))).ok());
  answers.done[1].WaitForNotification();
  CHECK(model::IsDeviceLost(answers.by_id.at(1).status()));
  // Once the engine has told its observer, later calls are refused at
  // once, naming the loss.
  WaitFor(bench.recorder, [&] { return !bench.recorder.lost.empty(); });
  Answers later;
  const absl::Status refused =
      bench.engine->TrySubmit(later.Job(2, Questions(2, 1, 1)));
  CHECK(absl::IsUnavailable(refused));
  CHECK_THAT(std::string(refused.message()),
             Catch::Contains("the model's device failed in an earlier pass"));
  bench.engine->Stop();
  REQUIRE(bench.recorder.lost.size() == 1);
  CHECK(bench.recorder.lost_on == bench.runner.ran);
  CHECK(bench.runner.bound == bench.runner.ran);
  CHECK(bench.runner.ran != std::this_thread::get_id());
}

TEST_CASE("a hold keeps the engine from planning until its file exists",
          "[engine]") {
  const std::filesystem::path go =
      std::filesystem::temp_directory_path() /
      ("mesa-anyjev-hold-" + std::to_string(::getpid()));
  std::filesystem::remove(go);
  Bench bench(/*budget=*/1000, *FaultPlan::Parse("hold@1=" + go.string()));
  bench.engine->Start();
  Answers answers;
  REQUIRE(bench.engine->TrySubmit(answers.Job(1, Questions(1, 1, 1))).ok());
  // The note is the event: the engine is held.
  WaitFor(bench.recorder, [&] { return !bench.recorder.notes.empty(); });
  REQUIRE(bench.engine->TrySubmit(answers.Job(2, Questions(2, 1, 1))).ok());
  CHECK(bench.recorder.passes.empty());
  std::ofstream(go.string()) << "go\n";
  bench.engine->Stop();
  std::filesystem::remove(go);
  CHECK(answers.by_id.at(1).ok());
  CHECK(answers.by_id.at(2).ok());
  // Both calls rode in the first pass: it was planned after the hold.
  REQUIRE(bench.recorder.passes.size() == 1);
  CHECK(bench.recorder.passes[0].shares.size() == 2);
  CHECK_THAT(bench.recorder.notes[0],
             Catch::Contains("engine held before pass 1 until"));
}

TEST_CASE("the model's check refuses bad input before it is held", "[engine]") {
  Bench bench;
  bench.engine->Start();
  Answers answers;
  std::vector<PromptGroup> bad = Questions(1, 1, 1);
  bad[0].suffixes[0].push_back(100000);  // the vocabulary is 100000
  CHECK(absl::IsInvalidArgument(bench.engine->TrySubmit(answers.Job(1, bad))));
  CHECK(absl::IsInvalidArgument(bench.engine->TrySubmit(
      answers.Job(2, Questions(2, 1, 1), {}, HiddenStatesTask{{5}}))));
  std::vector<PromptGroup> huge = Questions(3, 1, 1, /*prefix_tokens=*/4096);
  const absl::Status pool = bench.engine->TrySubmit(answers.Job(3, huge));
  CHECK(absl::IsResourceExhausted(pool));
  CHECK_THAT(std::string(pool.message()),
             Catch::Contains("the pool (engine.kv_pool_bytes) holds 512"));
  bench.engine->Stop();
  CHECK(answers.by_id.empty());
}

}  // namespace
}  // namespace mesa_anyjev::engine
