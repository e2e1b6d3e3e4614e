#include "server/daemon/drain_watchdog.h"

#include <utility>

namespace mesa_anyjev::daemon {

DrainWatchdog::DrainWatchdog(absl::Duration bound, std::function<void()> expire)
    : thread_([this, bound, expire = std::move(expire)] {
        if (!disarmed_.WaitForNotificationWithTimeout(bound)) expire();
      }) {}

DrainWatchdog::~DrainWatchdog() {
  Disarm();
  thread_.join();
}

void DrainWatchdog::Disarm() {
  if (!disarmed_.HasBeenNotified()) disarmed_.Notify();
}

}  // namespace mesa_anyjev::daemon
