// The engine over a model with only the Backend seam (its call loop):
// refusal when full, arrival order for one tenant, work whose deadline
// passed or whose caller cancelled never running, and compatible jobs held
// together running as one ForwardCall whose output each caller gets its
// share of (or its own status when it stopped meanwhile). The pass loop's
// tests are in engine_passes_test.cc.
#include "server/engine/engine.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "absl/synchronization/notification.h"
#include "server/engine/call_loop.h"

namespace mesa_anyjev::engine {
namespace {

struct Recorder : EngineObserver {
  std::mutex mu;
  std::vector<std::string> skipped;
  int64_t max_depth = 0;
  int runs = 0;  // model calls
  void OnSkipped(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu);
    skipped.push_back(reason);
  }
  void OnQueueDepth(int64_t depth) override {
    std::lock_guard<std::mutex> lock(mu);
    max_depth = std::max(max_depth, depth);
  }
  void OnPass(const PassRecord&) override {
    std::lock_guard<std::mutex> lock(mu);
    ++runs;
  }
};

// A job's groups: one group of `tokens` tokens in all, whose prefix is the
// job's id and then zeros, with `prompts` suffixes (the first empty, the
// others of one token).
std::vector<PromptGroup> GroupsOf(int id, int64_t tokens, int prompts = 1) {
  PromptGroup group;
  group.prefix.assign(static_cast<size_t>(tokens - prompts), 0);
  group.prefix.insert(group.prefix.begin(), id);
  group.suffixes.push_back({});
  for (int s = 1; s < prompts; ++s) group.suffixes.push_back({s});
  return {group};
}

int IdOf(const ForwardMember& member) {
  return member.groups->front().prefix.front();
}

// The model: records each call's members by id and answers each prompt with
// its job's id (n_tokens, or every hidden value) and its suffix index.
class RecordingModel final : public ForwardModel {
 public:
  // Runs first in every call, on the engine thread (block, cancel, throw).
  std::function<void(const ForwardCall&)> before;
  std::vector<std::vector<int>> calls;  // read after the queue stopped

  absl::StatusOr<ForwardOutput> Run(const ForwardCall& call) override {
    if (before) before(call);
    std::vector<int> ids;
    for (const ForwardMember& m : call.members) ids.push_back(IdOf(m));
    calls.push_back(ids);
    if (std::holds_alternative<LogprobsTask>(call.task)) {
      GroupLogprobs rows;
      for (const PromptGroup* group : call.Groups()) {
        rows.emplace_back();
        for (size_t s = 0; s < group->suffixes.size(); ++s) {
          PromptLogprobs row;
          row.n_tokens = group->prefix.front();
          row.label_logprobs = {static_cast<double>(s)};
          rows.back().push_back(row);
        }
      }
      return rows;
    }
    HiddenStatesResult hidden;
    hidden.layers = std::get<HiddenStatesTask>(call.task).layers;
    hidden.hidden_size = 2;
    for (const PromptGroup* group : call.Groups()) {
      for (size_t s = 0; s < group->suffixes.size(); ++s) {
        for (size_t l = 0; l < hidden.layers.size(); ++l) {
          hidden.values.push_back(static_cast<float>(group->prefix.front()));
          hidden.values.push_back(static_cast<float>(s));
        }
        ++hidden.n_prompts;
      }
    }
    return hidden;
  }
};

// What the callers were answered, by job id.
struct Answers {
  std::mutex mu;
  std::map<int, absl::StatusOr<ForwardOutput>> by_id;

  ForwardJob Job(int id, int64_t tokens, ForwardTask task = LogprobsTask{},
                 Caller caller = {}, int prompts = 1) {
    return ForwardJob{std::move(task), GroupsOf(id, tokens, prompts), caller,
                      [this, id](absl::StatusOr<ForwardOutput> out) {
                        std::lock_guard<std::mutex> lock(mu);
                        by_id.emplace(id, std::move(out));
                      }};
  }
};

// An engine over `model` (null: none loaded yet) with the call loop's
// merging budget, holding up to `capacity` calls.
std::unique_ptr<Engine> MakeEngine(int32_t capacity, EngineObserver* observer,
                                   ForwardModel* model, int64_t budget = 0) {
  EngineOptions options;
  options.limits.capacity = capacity;
  auto engine = std::make_unique<Engine>(options, observer);
  if (model != nullptr) {
    engine->SetLoop(std::make_unique<CallLoop>(model, budget, observer));
  }
  return engine;
}

// A model whose first call blocks until released, so that the jobs
// submitted meanwhile queue behind it.
struct Blocker {
  absl::Notification running, release;
  bool blocked = false;

  void Install(RecordingModel& model) {
    model.before = [this](const ForwardCall&) {
      if (blocked) return;
      blocked = true;
      running.Notify();
      release.WaitForNotification();
    };
  }
};

TEST_CASE("the engine refuses at once when it holds its capacity", "[engine]") {
  Recorder recorder;
  RecordingModel model;
  Blocker blocker;
  blocker.Install(model);
  // The capacity counts the calls waiting: the one running leaves its place.
  auto engine = MakeEngine(3, &recorder, &model);
  engine->Start();
  Answers answers;
  REQUIRE(engine->TrySubmit(answers.Job(0, 1)).ok());
  blocker.running.WaitForNotification();  // the engine thread is busy now
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(engine->TrySubmit(answers.Job(i, 1)).ok());
  }
  ForwardJob refused = answers.Job(9, 1);
  refused.done = [](absl::StatusOr<ForwardOutput>) {
    FAIL("a refused job must not complete");
  };
  absl::Status full = engine->TrySubmit(std::move(refused));
  CHECK(absl::IsResourceExhausted(full));
  CHECK_THAT(std::string(full.message()),
             Catch::Contains("server.queue_capacity"));
  blocker.release.Notify();
  engine->Stop();
  CHECK(answers.by_id.size() == 4);
  // The queue depth counts the calls waiting: the one running is not.
  CHECK(recorder.max_depth == 3);
}

TEST_CASE("the engine runs jobs in arrival order", "[engine]") {
  RecordingModel model;
  auto engine = MakeEngine(16, nullptr, &model);
  Answers answers;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(engine->TrySubmit(answers.Job(i, 1)).ok());
  }
  engine->Start();
  engine->Stop();  // drains everything accepted
  // No batch budget: each job is a call of its own.
  const std::vector<std::vector<int>> want = {{0}, {1}, {2}, {3}, {4},
                                              {5}, {6}, {7}, {8}, {9}};
  CHECK(model.calls == want);
  for (auto& [id, out] : answers.by_id) {
    INFO(id);
    REQUIRE(out.ok());
    CHECK(std::get<GroupLogprobs>(*out)[0][0].n_tokens == id);
  }
}

TEST_CASE("expired and cancelled jobs never run", "[engine]") {
  Recorder recorder;
  RecordingModel model;
  auto engine = MakeEngine(4, &recorder, &model);
  std::atomic<bool> cancelled{true};
  Answers answers;
  REQUIRE(engine
              ->TrySubmit(
                  answers.Job(1, 1, LogprobsTask{},
                              {absl::Now() - absl::Milliseconds(1), nullptr}))
              .ok());
  REQUIRE(engine
              ->TrySubmit(answers.Job(2, 1, LogprobsTask{},
                                      {absl::InfiniteFuture(), &cancelled}))
              .ok());
  engine->Start();
  engine->Stop();
  CHECK(model.calls.empty());
  CHECK(answers.by_id.at(1).status().code() ==
        absl::StatusCode::kDeadlineExceeded);
  CHECK(answers.by_id.at(2).status().code() == absl::StatusCode::kCancelled);
  CHECK_THAT(std::string(answers.by_id.at(2).status().message()),
             Catch::StartsWith("waiting in the queue: "));
  CHECK(recorder.skipped == std::vector<std::string>{"deadline", "cancelled"});
}

TEST_CASE("a stopped engine refuses new work as UNAVAILABLE", "[engine]") {
  auto engine = MakeEngine(4, nullptr, nullptr);
  engine->Start();
  engine->Stop();
  Answers answers;
  CHECK(absl::IsUnavailable(engine->TrySubmit(answers.Job(1, 1))));
  CHECK(answers.by_id.empty());
}

TEST_CASE("a job that runs before the model is loaded is UNAVAILABLE",
          "[engine]") {
  auto engine = MakeEngine(4, nullptr, nullptr);
  engine->Start();
  const absl::StatusOr<ForwardOutput> out =
      engine->SubmitAndWait(LogprobsTask{}, GroupsOf(1, 1), {});
  CHECK(absl::IsUnavailable(out.status()));
  CHECK_THAT(std::string(out.status().message()),
             Catch::Contains("no model loaded"));
}

TEST_CASE("an exception in model code becomes INTERNAL", "[engine]") {
  RecordingModel model;
  model.before = [](const ForwardCall&) {
    throw std::runtime_error("CUDA out of memory");
  };
  auto engine = MakeEngine(4, nullptr, &model);
  engine->Start();
  const absl::Status seen =
      engine->SubmitAndWait(LogprobsTask{}, GroupsOf(1, 1), {}).status();
  CHECK(absl::IsInternal(seen));
  CHECK_THAT(std::string(seen.message()),
             Catch::Contains("CUDA out of memory"));
}

TEST_CASE("jobs of one kind queued together run as one call, in order",
          "[engine]") {
  Recorder recorder;
  RecordingModel model;
  Blocker blocker;
  blocker.Install(model);
  auto engine = MakeEngine(16, &recorder, &model, 10);
  engine->Start();
  Answers answers;
  const ForwardTask top5 = LogprobsTask{5};
  const ForwardTask hidden = HiddenStatesTask{{1, 2}};
  REQUIRE(engine->TrySubmit(answers.Job(0, 1, HiddenStatesTask{{3}})).ok());
  blocker.running.WaitForNotification();
  // Queued behind the blocker: 1, 2 and 3 share a task and fit the budget
  // (4 + 4 + 2 = 10); 4 would not (12); 5 has another task (other top_k);
  // 6 and 7 share layers; 8 is stale by the time it runs and is answered
  // without running; 9 has other layers.
  REQUIRE(engine->TrySubmit(answers.Job(1, 4, top5)).ok());
  REQUIRE(engine->TrySubmit(answers.Job(2, 4, top5, {}, 2)).ok());
  REQUIRE(engine->TrySubmit(answers.Job(3, 2, top5)).ok());
  REQUIRE(engine->TrySubmit(answers.Job(4, 2, top5)).ok());
  REQUIRE(engine->TrySubmit(answers.Job(5, 1, LogprobsTask{0})).ok());
  REQUIRE(engine->TrySubmit(answers.Job(6, 3, hidden, {}, 2)).ok());
  REQUIRE(engine->TrySubmit(answers.Job(7, 1, hidden)).ok());
  REQUIRE(engine
              ->TrySubmit(answers.Job(
                  8, 1, hidden, {absl::Now() - absl::Seconds(1), nullptr}))
              .ok());
  REQUIRE(engine->TrySubmit(answers.Job(9, 1, HiddenStatesTask{{2, 1}})).ok());
  blocker.release.Notify();
  engine->Stop();
  const std::vector<std::vector<int>> want = {{0}, {1, 2, 3}, {4},
                                              {5}, {6, 7},    {9}};
  CHECK(model.calls == want);
  CHECK(recorder.runs == 6);
  REQUIRE(answers.by_id.size() == 10);
  CHECK(answers.by_id.at(8).status().code() ==
        absl::StatusCode::kDeadlineExceeded);
  CHECK(recorder.skipped == std::vector<std::string>{"deadline"});
  // Each caller gets its own rows of the merged output, and only those.
  for (int id : {1, 2, 3, 4, 5}) {
    INFO(id);
    const auto& rows = std::get<GroupLogprobs>(*answers.by_id.at(id));
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].size() == (id == 2 ? 2u : 1u));
    for (size_t s = 0; s < rows[0].size(); ++s) {
      CHECK(rows[0][s].n_tokens == id);
      CHECK(rows[0][s].label_logprobs[0] == static_cast<double>(s));
    }
  }
  for (int id : {6, 7}) {
    INFO(id);
    const auto& states = std::get<HiddenStatesResult>(*answers.by_id.at(id));
    const int prompts = id == 6 ? 2 : 1;
    CHECK(states.n_prompts == prompts);
    CHECK(states.layers == std::vector<int32_t>{1, 2});
    CHECK(states.hidden_size == 2);
    std::vector<float> want_values;
    for (int s = 0; s < prompts; ++s) {
      for (int l = 0; l < 2; ++l) {
        want_values.push_back(static_cast<float>(id));
        want_values.push_back(static_cast<float>(s));
      }
    }
    CHECK(states.values == want_values);
  }
}

TEST_CASE(
    "a member of a merged call that stops during it gets its own status; "
    "the others their results",
    "[engine]") {
  RecordingModel model;
  Blocker blocker;
  std::atomic<bool> gone{false}, never{false};
  std::vector<std::vector<bool>> seen_stopped;  // per call, per member
  model.before = [&](const ForwardCall& call) {
    if (!blocker.blocked) {
      blocker.blocked = true;
      blocker.running.Notify();
      blocker.release.WaitForNotification();
      return;
    }
    // Callers 1 and 3 cancel while the merged call runs; 2 still waits, so
    // the call goes on.
    gone.store(true);
    std::vector<bool> stopped;
    for (const ForwardMember& m : call.members) {
      stopped.push_back(m.caller.ShouldStop(absl::Now()));
    }
    seen_stopped.push_back(stopped);
    CHECK_FALSE(call.ShouldStop(absl::Now()));
  };
  auto engine = MakeEngine(8, nullptr, &model, 100);
  engine->Start();
  Answers answers;
  REQUIRE(engine->TrySubmit(answers.Job(0, 1, LogprobsTask{1})).ok());
  blocker.running.WaitForNotification();
  REQUIRE(engine
              ->TrySubmit(answers.Job(1, 2, LogprobsTask{},
                                      {absl::InfiniteFuture(), &gone}))
              .ok());
  REQUIRE(engine
              ->TrySubmit(answers.Job(2, 2, LogprobsTask{},
                                      {absl::InfiniteFuture(), &never}))
              .ok());
  REQUIRE(engine
              ->TrySubmit(answers.Job(3, 2, LogprobsTask{},
                                      {absl::InfiniteFuture(), &gone}))
              .ok());
  blocker.release.Notify();
  engine->Stop();
  REQUIRE(model.calls.size() == 2);
  CHECK(model.calls[1] == std::vector<int>{1, 2, 3});
  CHECK(seen_stopped[0] == std::vector<bool>{true, false, true});
  for (int id : {1, 3}) {
    INFO(id);
    const absl::Status& status = answers.by_id.at(id).status();
    CHECK(status.code() == absl::StatusCode::kCancelled);
    CHECK_THAT(std::string(status.message()),
               Catch::StartsWith("the forward: "));
  }
  REQUIRE(answers.by_id.at(2).ok());
  CHECK(std::get<GroupLogprobs>(*answers.by_id.at(2))[0][0].n_tokens == 2);
}

}  // namespace
}  // namespace mesa_anyjev::engine
