// The drain's hard bound: it fires when the drain overruns, never after a
// drain that finished. Both wait on events, not on a clock window.
#include "server/daemon/drain_watchdog.h"

#include <atomic>
#include <catch2/catch.hpp>

#include "absl/synchronization/notification.h"

namespace mesa_anyjev::daemon {
namespace {

TEST_CASE("The drain watchdog fires when the drain overruns its bound",
          "[drain_watchdog]") {
  absl::Notification fired;
  DrainWatchdog watchdog(absl::Milliseconds(1), [&fired] { fired.Notify(); });
  // The drain "never ends": the bound alone must end it.
  fired.WaitForNotification();
  CHECK(fired.HasBeenNotified());
}

TEST_CASE("A drain that finishes disarms the watchdog", "[drain_watchdog]") {
  std::atomic<int> fired{0};
  {
    // A bound no test waits out: only disarming lets this scope end.
    DrainWatchdog watchdog(absl::Hours(1), [&fired] { ++fired; });
    watchdog.Disarm();
  }
  CHECK(fired.load() == 0);
  {
    DrainWatchdog disarmed_by_scope(absl::Hours(1), [&fired] { ++fired; });
  }
  CHECK(fired.load() == 0);
}

}  // namespace
}  // namespace mesa_anyjev::daemon
