// The gateway backend's circuit breaker (docs/gateway.md).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mesa_anyjev::gateway {

// Consecutive failures open it for `open_for`; while open Check refuses at
// once with UNAVAILABLE naming the breaker; after `open_for` one half-open
// probe decides whether it closes. Success resets the count. Thread-safe.
class CircuitBreaker {
 public:
  CircuitBreaker(int32_t failures_to_open, absl::Duration open_for)
      : failures_to_open_(failures_to_open), open_for_(open_for) {}

  // OK(0): closed, go on. OK(token): the open period is over and this
  // caller is the one half-open probe; a Success closes the breaker, a
  // Failure opens it again, and Release(token) (an attempt that ended with
  // neither) lets the next caller probe. UNAVAILABLE while open, or while
  // another probe is deciding.
  absl::StatusOr<uint64_t> Check(absl::Time now);
  void Failure(absl::Time now);
  void Success();
  void Release(uint64_t probe);
  bool open(absl::Time now);

 private:
  const int32_t failures_to_open_;
  const absl::Duration open_for_;
  std::mutex mu_;
  int32_t failures_ = 0;
  std::optional<absl::Time> opened_at_;
  uint64_t probe_ = 0;   // the deciding probe's token, 0 when none
  uint64_t probes_ = 0;  // tokens handed out
};

}  // namespace mesa_anyjev::gateway
