// The drain's hard bound: workers poll their call's cancel flag, but work
// that does not poll (a long kernel, a head fit) must not hold the exit. A
// DrainWatchdog armed when the drain begins calls `expire` (the daemon:
// log and _Exit(1)) unless it is disarmed within `bound`.
#pragma once

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace mesa_anyjev::daemon {

class DrainWatchdog {
 public:
  DrainWatchdog(absl::Duration bound, std::function<void()> expire);
  // Disarms and joins.
  ~DrainWatchdog();
  DrainWatchdog(const DrainWatchdog&) = delete;
  DrainWatchdog& operator=(const DrainWatchdog&) = delete;

  void Disarm();

 private:
  absl::Notification disarmed_;
  std::thread thread_;
};

}  // namespace mesa_anyjev::daemon
