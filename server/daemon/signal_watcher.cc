#include "server/daemon/signal_watcher.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

namespace mesa_anyjev::daemon {
namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void SignalWatcher::BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void SignalWatcher::Start(std::function<void(int)> on_first) {
  thread_ = std::thread([on_first = std::move(on_first)] {
    sigset_t set = ShutdownSignals();
    int signal_number = 0;
    if (sigwait(&set, &signal_number) != 0) return;
    on_first(signal_number);
    if (sigwait(&set, &signal_number) != 0) return;
    static const char kMessage[] =
        "mesa-anyjevd: second signal, exiting without draining\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(128 + signal_number);
  });
  // The process exits while this thread still waits for a second signal.
  thread_.detach();
}

SignalWatcher::~SignalWatcher() = default;

}  // namespace mesa_anyjev::daemon
