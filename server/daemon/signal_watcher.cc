#include "server/daemon/signal_watcher.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

namespace mesa_anyjev::daemon {
namespace {

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void SignalWatcher::BlockSignals() {
  sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void SignalWatcher::Start(std::function<void(int)> on_first,
                          std::function<void()> on_reload) {
  thread_ = std::thread(
      [on_first = std::move(on_first), on_reload = std::move(on_reload)] {
        sigset_t set = WatchedSignals();
        bool draining = false;
        for (;;) {
          int signal_number = 0;
          if (sigwait(&set, &signal_number) != 0) return;
          if (signal_number == SIGHUP) {
            on_reload();
          } else if (!draining) {
            draining = true;
            on_first(signal_number);
          } else {
            static const char kMessage[] =
                "mesa-anyjevd: second signal, exiting without draining\n";
            (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
            _exit(128 + signal_number);
          }
        }
      });
  // The process exits while this thread still waits for a signal.
  thread_.detach();
}

SignalWatcher::~SignalWatcher() = default;

}  // namespace mesa_anyjev::daemon
