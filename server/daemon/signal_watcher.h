// Signal handling with sigwait on a dedicated thread, so no code runs in a
// signal handler: SIGHUP reads the tokens file again (any number of times),
// the first SIGTERM/SIGINT starts the drain, a second one exits at once.
#pragma once

#include <functional>
#include <thread>

namespace mesa_anyjev::daemon {

class SignalWatcher {
 public:
  // Call first in main, before any thread starts, so every thread inherits
  // the blocked mask and only the watcher receives the signals.
  static void BlockSignals();

  // Both run on the watcher thread: `on_reload` at each SIGHUP, `on_first`
  // at the first SIGTERM or SIGINT; a second of those calls
  // _exit(128 + signal) without draining.
  void Start(std::function<void(int)> on_first,
             std::function<void()> on_reload);
  ~SignalWatcher();

 private:
  std::thread thread_;
};

}  // namespace mesa_anyjev::daemon
