// Items read one after another, worked on side by side, emitted in the
// order read: how a pipeline run keeps several calls in flight (so the
// daemon's engine packs full passes) yet writes its output in input order.
// At most `window` items are read and not yet emitted, which bounds memory
// whatever the input's length.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // Called while waiting for the oldest item (every `tick_every`): a
  // progress line can show what happens meanwhile (retries).
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
  std::deque<std::unique_ptr<Slot>> slots;
  absl::Status read_error, emit_error;
  bool more = true;
  for (;;) {
    while (more && read_error.ok() && emit_error.ok() &&
           static_cast<int>(slots.size()) < window) {
      absl::StatusOr<std::optional<Item>> got = steps.next();
      if (!got.ok()) {
        read_error = got.status();
        break;
      }
      if (!got->has_value()) {
        more = false;
        break;
      }
      auto slot = std::make_unique<Slot>(std::move(**got));
      Slot* raw = slot.get();
      raw->thread = std::thread([raw, &steps] {
        steps.work(raw->item);
        raw->done.Notify();
      });
      slots.push_back(std::move(slot));
    }
    if (slots.empty()) return emit_error.ok() ? read_error : emit_error;
    Slot& oldest = *slots.front();
    while (!oldest.done.WaitForNotificationWithTimeout(steps.tick_every)) {
      if (steps.tick) steps.tick();
    }
    oldest.thread.join();
    if (emit_error.ok()) emit_error = steps.emit(oldest.item);
    slots.pop_front();
  }
}

}  // namespace mesa_anyjev::client::pipeline
