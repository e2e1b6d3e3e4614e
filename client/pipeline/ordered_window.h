// Items read one after another, worked on side by side, emitted in the
// order read: how a pipeline run keeps several calls in flight (so the
// daemon's engine packs full passes) yet writes its output in input order.
// At most `window` items are read and not yet emitted, which bounds memory
// whatever the input's length. Reading has a thread of its own, so what is
// done is emitted while the input (a pipe from a slow producer) has no next
// item yet.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace mesa_anyjev::client::pipeline {

template <typename Item>
struct OrderedSteps {
  // The next item, nullopt at the end; an error stops the reading, and the
  // items already read are still worked on and emitted before it returns.
  std::function<absl::StatusOr<std::optional<Item>>()> next;
  // Runs in a thread of its own, side by side with other items' work.
  std::function<void(Item&)> work;
  // In the caller's thread, in the order read; an error stops the run (the
  // items in flight are waited for, not emitted).
  std::function<absl::Status(Item&)> emit;
  // Called while waiting (every `tick_every`): a progress line can show
  // what happens meanwhile (retries).
  std::function<void()> tick;
  absl::Duration tick_every = absl::Milliseconds(500);
};

template <typename Item>
absl::Status RunOrdered(int window, const OrderedSteps<Item>& steps) {
  struct Slot {
    explicit Slot(Item in) : item(std::move(in)) {}
    Item item;
    absl::Notification done;
    std::thread thread;
  };
  // Shared with the reader thread, which may outlive this call (below).
  struct Shared {
    absl::Mutex mu;
    std::deque<std::shared_ptr<Slot>> slots ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
    bool read_all ABSL_GUARDED_BY(mu) = false;
    absl::Status read_error ABSL_GUARDED_BY(mu);
    absl::Notification reader_done;
  };
  auto shared = std::make_shared<Shared>();
  OrderedSteps<Item> own = steps;  // the reader may outlive the caller's
  std::thread reader([shared, own, window] {
    for (;;) {
      {
        absl::MutexLock lock(&shared->mu);
        auto room = [&]() ABSL_SHARED_LOCKS_REQUIRED(shared->mu) {
          return shared->stop ||
                 static_cast<int>(shared->slots.size()) < window;
        };
        shared->mu.Await(absl::Condition(&room));
        if (shared->stop) break;
      }
      absl::StatusOr<std::optional<Item>> got = own.next();
      absl::MutexLock lock(&shared->mu);
      if (shared->stop) break;  // the run ended while this was read
      if (!got.ok() || !got->has_value()) {
        if (!got.ok()) shared->read_error = got.status();
        break;
      }
      auto slot = std::make_shared<Slot>(std::move(**got));
      slot->thread = std::thread([slot, work = own.work] {
        work(slot->item);
        slot->done.Notify();
      });
      shared->slots.push_back(std::move(slot));
    }
    {
      absl::MutexLock lock(&shared->mu);
      shared->read_all = true;
    }
    shared->reader_done.Notify();
  });

  absl::Status emit_error;
  for (;;) {
    std::shared_ptr<Slot> oldest;
    {
      absl::MutexLock lock(&shared->mu);
      auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(shared->mu) {
        return !shared->slots.empty() || shared->read_all || shared->stop;
      };
      while (!shared->mu.AwaitWithTimeout(absl::Condition(&ready),
                                          steps.tick_every)) {
        if (steps.tick) steps.tick();
      }
      if (shared->slots.empty()) break;  // all emitted, or stopped
      oldest = shared->slots.front();
    }
    while (!oldest->done.WaitForNotificationWithTimeout(steps.tick_every)) {
      if (steps.tick) steps.tick();
    }
    oldest->thread.join();
    if (emit_error.ok()) emit_error = steps.emit(oldest->item);
    absl::MutexLock lock(&shared->mu);
    shared->slots.pop_front();
    if (!emit_error.ok()) shared->stop = true;
  }
  absl::Status read_error;
  {
    absl::MutexLock lock(&shared->mu);
    read_error = shared->read_error;
  }
  if (shared->reader_done.HasBeenNotified()) {
    reader.join();
  } else {
    // Stopped by an emit error while the reader waits for input that may
    // never come (an open pipe): the command ends with the error, the
    // process with it.
    reader.detach();
  }
  return emit_error.ok() ? read_error : emit_error;
}

}  // namespace mesa_anyjev::client::pipeline
