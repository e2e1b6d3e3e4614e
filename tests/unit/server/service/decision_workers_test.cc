// The decision workers: a class's own threads, fair dispatch by tenant and
// weight inside a class, the capacity and the stop. Tasks block on
// notifications the test gives, so every order is the workers' own.
#include "server/service/decision_workers.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace mesa_anyjev::service {
namespace {

using Owner = DecisionWorkers::Owner;

// Tasks that record their start and wait for their release.
class Tasks {
 public:
  std::function<void()> Make(const std::string& name) {
    auto release = std::make_shared<absl::Notification>();
    {
      absl::MutexLock lock(&mu_);
      release_[name] = release;
    }
    return [this, name, release] {
      {
        absl::MutexLock lock(&mu_);
        started_.push_back(name);
      }
      release->WaitForNotification();
    };
  }
  void Release(const std::string& name) {
    absl::MutexLock lock(&mu_);
    release_.at(name)->Notify();
  }
  // Waits until `n` tasks have started; their names in start order.
  std::vector<std::string> WaitStarted(size_t n) {
    absl::MutexLock lock(&mu_);
    want_ = n;
    mu_.Await(absl::Condition(&Tasks::Enough, this));
    return started_;
  }
  void ReleaseAll() {
    absl::MutexLock lock(&mu_);
    for (auto& [name, release] : release_) {
      if (!release->HasBeenNotified()) release->Notify();
    }
  }

 private:
  static bool Enough(Tasks* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return t->started_.size() >= t->want_;  // under mu_ (Await)
  }
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<absl::Notification>> release_;
  std::vector<std::string> started_;
  size_t want_ = 0;
};

Owner Batch(const std::string& tenant, double weight = 1.0) {
  return {tenant, Priority::kBatch, weight};
}

TEST_CASE("an interactive call never waits for a worker held by batch work") {
  Tasks tasks;
  DecisionWorkers workers(/*threads=*/1, /*capacity=*/16);
  REQUIRE(workers.TrySubmit(Batch("pipe"), tasks.Make("b1")).ok());
  REQUIRE(workers.TrySubmit(Batch("pipe"), tasks.Make("b2")).ok());
  tasks.WaitStarted(1);  // the one batch worker is held
  REQUIRE(
      workers
          .TrySubmit({"curator", Priority::kInteractive, 1.0}, tasks.Make("i1"))
          .ok());
  CHECK(tasks.WaitStarted(2) == std::vector<std::string>{"b1", "i1"});
  tasks.ReleaseAll();
  workers.Stop();
  CHECK(tasks.WaitStarted(3).size() == 3);  // what was accepted ran
}

TEST_CASE(
    "a free worker takes the call of the tenant with the fewest running per "
    "unit of weight") {
  Tasks tasks;
  DecisionWorkers workers(/*threads=*/2, /*capacity=*/16);
  for (const char* name : {"a1", "a2", "a3"}) {
    REQUIRE(workers.TrySubmit(Batch("a"), tasks.Make(name)).ok());
  }
  tasks.WaitStarted(2);  // a1 and a2 hold both workers
  REQUIRE(workers.TrySubmit(Batch("b"), tasks.Make("b1")).ok());
  tasks.Release("a1");
  // a has one running, b none: b's call goes before a's older one.
  CHECK(tasks.WaitStarted(3).back() == "b1");
  tasks.Release("a2");
  CHECK(tasks.WaitStarted(4).back() == "a3");
  tasks.ReleaseAll();
  workers.Stop();
}

TEST_CASE("weights divide the workers") {
  Tasks tasks;
  DecisionWorkers workers(/*threads=*/4, /*capacity=*/16);
  // b alone holds every worker (work-conserving) and queues two more; then
  // a, at weight 3, queues four.
  for (int i = 0; i < 6; ++i) {
    REQUIRE(
        workers.TrySubmit(Batch("b", 1.0), tasks.Make("b" + std::to_string(i)))
            .ok());
  }
  tasks.WaitStarted(4);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(
        workers.TrySubmit(Batch("a", 3.0), tasks.Make("a" + std::to_string(i)))
            .ok());
  }
  // As b's calls end, a takes each freed worker while it runs fewer per
  // unit of weight (a: 0, 1/3, 2/3 against b: 3, 2, 1); at 3/3 against b's
  // 0 b's next goes. Equal weights would have given b the third worker.
  const std::vector<std::string> want = {"a0", "a1", "a2", "b4"};
  for (int i = 0; i < 4; ++i) {
    tasks.Release("b" + std::to_string(i));
    CHECK(tasks.WaitStarted(5 + i).back() == want[i]);
  }
  tasks.ReleaseAll();
  workers.Stop();
}

TEST_CASE("not fair (engine.scheduler: fifo): one pool in arrival order") {
  Tasks tasks;
  DecisionWorkers workers(/*threads=*/1, /*capacity=*/16, /*fair=*/false);
  for (const char* name : {"a1", "a2", "a3"}) {
    REQUIRE(workers.TrySubmit(Batch("a"), tasks.Make(name)).ok());
  }
  tasks.WaitStarted(1);
  REQUIRE(workers.TrySubmit(Batch("b"), tasks.Make("b1")).ok());
  REQUIRE(
      workers
          .TrySubmit({"curator", Priority::kInteractive, 1.0}, tasks.Make("i1"))
          .ok());
  // The interactive call waits for the one worker, behind a's older calls.
  const std::vector<std::string> want = {"a1", "a2", "a3", "b1", "i1"};
  for (size_t i = 0; i + 1 < want.size(); ++i) {
    tasks.Release(want[i]);
    CHECK(tasks.WaitStarted(i + 2).back() == want[i + 1]);
  }
  tasks.ReleaseAll();
  workers.Stop();
}

TEST_CASE("a full queue refuses at once, and a stopped one as draining") {
  Tasks tasks;
  DecisionWorkers workers(/*threads=*/1, /*capacity=*/2);
  REQUIRE(workers.TrySubmit(Batch("a"), tasks.Make("a1")).ok());
  tasks.WaitStarted(1);
  REQUIRE(workers.TrySubmit(Batch("a"), tasks.Make("a2")).ok());
  REQUIRE(workers.TrySubmit(Batch("b"), tasks.Make("b1")).ok());
  const absl::Status full = workers.TrySubmit(Batch("c"), [] {});
  CHECK(absl::IsResourceExhausted(full));
  CHECK(std::string(full.message()).find("decision queue full (2 calls") !=
        std::string::npos);
  tasks.ReleaseAll();
  workers.Stop();
  CHECK(absl::IsUnavailable(workers.TrySubmit(Batch("a"), [] {})));
}

}  // namespace
}  // namespace mesa_anyjev::service
