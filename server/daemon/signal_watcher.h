// SIGTERM/SIGINT handling with sigwait on a dedicated thread, so no code runs
// in a signal handler: the first signal starts the drain, a second one exits
// at once.
#pragma once

#include <functional>
#include <thread>

namespace mesa_anyjev::daemon {

class SignalWatcher {
 public:
  // Call first in main, before any thread starts, so every thread inherits
  // the blocked mask and only the watcher receives the signals.
  static void BlockShutdownSignals();

  // `on_first` runs on the watcher thread; a second signal calls
  // _exit(128 + signal) without draining.
  void Start(std::function<void(int)> on_first);
  ~SignalWatcher();

 private:
  std::thread thread_;
};

}  // namespace mesa_anyjev::daemon
