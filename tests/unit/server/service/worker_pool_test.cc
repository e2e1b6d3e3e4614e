// The bounded queue of the bundle store and the Logprobs replies: a full
// queue refuses at once naming itself and its capacity, a stopped one as
// draining, and what was accepted runs before Stop returns.
#include "server/service/worker_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>

#include "absl/synchronization/notification.h"

namespace mesa_anyjev::service {
namespace {

TEST_CASE(
    "a full worker pool refuses naming its queue, and runs what it took") {
  WorkerPool pool("bundle store", /*threads=*/1, /*capacity=*/1);
  absl::Notification started, release;
  std::atomic<int> ran{0};
  REQUIRE(pool.TrySubmit([&] {
                started.Notify();
                release.WaitForNotification();
                ++ran;
              })
              .ok());
  started.WaitForNotification();  // the one thread is busy: the next waits
  REQUIRE(pool.TrySubmit([&] { ++ran; }).ok());
  const absl::Status full = pool.TrySubmit([&] { ++ran; });
  CHECK(absl::IsResourceExhausted(full));
  CHECK(std::string(full.message()).find("bundle store queue full (1 calls") !=
        std::string::npos);
  CHECK(std::string(full.message()).find("decision") == std::string::npos);
  release.Notify();
  pool.Stop();
  CHECK(ran.load() == 2);
  CHECK(absl::IsUnavailable(pool.TrySubmit([] {})));
}

}  // namespace
}  // namespace mesa_anyjev::service
