// The bounded queue: refusal when full, arrival order, and work whose
// deadline passed or whose caller cancelled never running.
#include "server/engine/job_queue.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <vector>

#include "absl/synchronization/notification.h"

namespace mesa_anyjev::engine {
namespace {

struct Recorder : EngineObserver {
  std::mutex mu;
  std::vector<std::string> skipped;
  int64_t max_depth = 0;
  void OnSkipped(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu);
    skipped.push_back(reason);
  }
  void OnQueueDepth(int64_t depth) override {
    std::lock_guard<std::mutex> lock(mu);
    max_depth = std::max(max_depth, depth);
  }
};

Job MakeJob(std::function<absl::Status(const CallControl&)> run,
            std::function<void(absl::Status)> done) {
  Job job;
  job.run = std::move(run);
  job.done = std::move(done);
  return job;
}

TEST_CASE("the job queue refuses at once when the queue is full",
          "[job_queue]") {
  Recorder recorder;
  JobQueue job_queue(/*capacity=*/2, &recorder);
  job_queue.Start();
  absl::Notification release, running;
  std::atomic<int> finished{0};
  auto blocker = MakeJob(
      [&](const CallControl&) {
        running.Notify();
        release.WaitForNotification();
        return absl::OkStatus();
      },
      [&](absl::Status) { ++finished; });
  REQUIRE(job_queue.TrySubmit(std::move(blocker)).ok());
  running.WaitForNotification();  // the engine thread is busy now
  for (int i = 0; i < 2; ++i) {
    REQUIRE(job_queue
                .TrySubmit(
                    MakeJob([](const CallControl&) { return absl::OkStatus(); },
                            [&](absl::Status) { ++finished; }))
                .ok());
  }
  absl::Status full = job_queue.TrySubmit(
      MakeJob([](const CallControl&) { return absl::OkStatus(); },
              [&](absl::Status) { FAIL("a refused job must not complete"); }));
  CHECK(absl::IsResourceExhausted(full));
  CHECK_THAT(std::string(full.message()),
             Catch::Contains("server.queue_capacity"));
  release.Notify();
  job_queue.Stop();
  CHECK(finished == 3);
  CHECK(recorder.max_depth == 2);
}

TEST_CASE("the job queue runs jobs in arrival order", "[job_queue]") {
  JobQueue job_queue(/*capacity=*/16, nullptr);
  std::vector<int> order;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(job_queue
                .TrySubmit(MakeJob(
                    [&order, i](const CallControl&) {
                      order.push_back(i);
                      return absl::OkStatus();
                    },
                    [](absl::Status status) { CHECK(status.ok()); }))
                .ok());
  }
  job_queue.Start();
  job_queue.Stop();  // drains everything accepted
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("expired and cancelled jobs never run", "[job_queue]") {
  Recorder recorder;
  JobQueue job_queue(/*capacity=*/4, &recorder);
  std::atomic<bool> cancelled{true};
  std::vector<absl::StatusCode> codes;
  bool ran = false;
  Job expired = MakeJob(
      [&](const CallControl&) {
        ran = true;
        return absl::OkStatus();
      },
      [&](absl::Status status) { codes.push_back(status.code()); });
  expired.deadline = absl::Now() - absl::Milliseconds(1);
  Job gone = MakeJob(
      [&](const CallControl&) {
        ran = true;
        return absl::OkStatus();
      },
      [&](absl::Status status) { codes.push_back(status.code()); });
  gone.cancelled = &cancelled;
  REQUIRE(job_queue.TrySubmit(std::move(expired)).ok());
  REQUIRE(job_queue.TrySubmit(std::move(gone)).ok());
  job_queue.Start();
  job_queue.Stop();
  CHECK_FALSE(ran);
  CHECK(codes ==
        std::vector<absl::StatusCode>{absl::StatusCode::kDeadlineExceeded,
                                      absl::StatusCode::kCancelled});
  CHECK(recorder.skipped == std::vector<std::string>{"deadline", "cancelled"});
}

TEST_CASE("a stopped job queue refuses new work as UNAVAILABLE",
          "[job_queue]") {
  JobQueue job_queue(/*capacity=*/4, nullptr);
  job_queue.Start();
  job_queue.Stop();
  absl::Status status = job_queue.TrySubmit(
      MakeJob([](const CallControl&) { return absl::OkStatus(); },
              [](absl::Status) {}));
  CHECK(absl::IsUnavailable(status));
}

TEST_CASE("an exception in model code becomes INTERNAL", "[job_queue]") {
  JobQueue job_queue(/*capacity=*/4, nullptr);
  absl::Status seen;
  REQUIRE(job_queue
              .TrySubmit(MakeJob(
                  [](const CallControl&) -> absl::Status {
                    throw std::runtime_error("CUDA out of memory");
                  },
                  [&](absl::Status status) { seen = status; }))
              .ok());
  job_queue.Start();
  job_queue.Stop();
  CHECK(absl::IsInternal(seen));
  CHECK_THAT(std::string(seen.message()),
             Catch::Contains("CUDA out of memory"));
}

TEST_CASE("jobs of one kind queued together run as one call, in order",
          "[job_queue]") {
  Recorder recorder;
  JobQueue job_queue(/*capacity=*/16, &recorder, /*batch_budget=*/10);
  job_queue.Start();
  absl::Notification release, running;
  std::mutex mu;
  std::vector<std::vector<int>> calls;  // payload ids per run_batch call
  std::vector<std::pair<int, absl::Status>> finished;
  auto batched = [&](std::string key, int id, int64_t tokens,
                     absl::Time deadline = absl::InfiniteFuture()) {
    Job job;
    job.deadline = deadline;
    job.batch_key = std::move(key);
    job.batch_tokens = tokens;
    job.batch_payload = reinterpret_cast<void*>(static_cast<intptr_t>(id));
    job.run_batch = [&](const std::vector<Job*>& jobs, const CallControl&) {
      std::vector<int> ids;
      for (Job* j : jobs) {
        ids.push_back(
            static_cast<int>(reinterpret_cast<intptr_t>(j->batch_payload)));
      }
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(ids);
      return std::vector<absl::Status>(jobs.size(), absl::OkStatus());
    };
    job.done = [&, id](absl::Status status) {
      std::lock_guard<std::mutex> lock(mu);
      finished.emplace_back(id, std::move(status));
    };
    return job;
  };
  REQUIRE(job_queue
              .TrySubmit(MakeJob(
                  [&](const CallControl&) {
                    running.Notify();
                    release.WaitForNotification();
                    return absl::OkStatus();
                  },
                  [](absl::Status) {}))
              .ok());
  running.WaitForNotification();
  // Queued behind the blocker: 1, 2 and 3 share a key and fit the budget
  // (4 + 4 + 2 = 10); 4 would not (12); 5 has another key; 6 joins 5; 7 is
  // stale by the time it runs and is answered without running.
  REQUIRE(job_queue.TrySubmit(batched("a", 1, 4)).ok());
  REQUIRE(job_queue.TrySubmit(batched("a", 2, 4)).ok());
  REQUIRE(job_queue.TrySubmit(batched("a", 3, 2)).ok());
  REQUIRE(job_queue.TrySubmit(batched("a", 4, 2)).ok());
  REQUIRE(job_queue.TrySubmit(batched("b", 5, 1)).ok());
  REQUIRE(job_queue.TrySubmit(batched("b", 6, 1)).ok());
  REQUIRE(
      job_queue.TrySubmit(batched("b", 7, 1, absl::Now() - absl::Seconds(1)))
          .ok());
  release.Notify();
  job_queue.Stop();
  const std::vector<std::vector<int>> want = {{1, 2, 3}, {4}, {5, 6}};
  CHECK(calls == want);
  REQUIRE(finished.size() == 7);
  for (const auto& [id, status] : finished) {
    INFO(id);
    CHECK(status.ok() == (id != 7));
  }
  CHECK(recorder.skipped == std::vector<std::string>{"deadline"});
}

}  // namespace
}  // namespace mesa_anyjev::engine
