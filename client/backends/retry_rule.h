// The one rule by which the CLI's runs (decide --out, annotate, bench run,
// learn fit) send a daemon call again, the Python client's rule
// (docs/rpc.md "Pipelines"): UNAVAILABLE (a daemon restarting, draining or
// gone from a pool), RESOURCE_EXHAUSTED that carries the daemon's pushback
// (a full queue), CANCELLED (the CLI never cancels its own calls: a drain
// cut it) and an attempt's own DEADLINE_EXCEEDED are sent again after
// exponential backoff with full jitter, never sooner than the pushback, up
// to 30 attempts a call and within the run's deadline; every other code is
// final. Nothing here knows gRPC: DaemonClient turns a call's status and its
// grpc-retry-pushback-ms trailer into an absl::Status (retry_after.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace mesa_anyjev::client {

struct RetryOptions {
  // The run's overall deadline: no attempt outlives it, and no retry starts
  // that would wait past it.
  absl::Time deadline = absl::InfiniteFuture();
  absl::Duration first_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  // Attempts of one call, the first included (0: only the deadline bounds).
  int max_attempts = 30;
  // No attempt is given less time than this (the Python client's
  // attempt_timeout): a long run's call may wait behind its own other calls
  // in the daemon's queue, and an attempt cut short is computed again.
  absl::Duration min_attempt_timeout = absl::ZeroDuration();
  // Each retry as it is decided: the failure, the attempt that failed
  // (1 = the first) and the wait before the next.
  std::function<void(const absl::Status&, int attempt, absl::Duration wait)>
      on_retry;
  // Tests replace the clock, the sleep and the jitter draw (in [0, 1)).
  std::function<absl::Time()> now;
  std::function<void(absl::Duration)> sleep;
  std::function<double()> draw;
};

class RetryRule {
 public:
  explicit RetryRule(RetryOptions options);

  // Whether a call that failed with `status` may succeed when sent again
  // (DEADLINE_EXCEEDED: its attempt's own timeout; Run ends a run whose
  // deadline cut the attempt instead).
  static bool Retryable(const absl::Status& status);

  // The wait after failed attempt `attempt` (1-based): `unit` (in [0, 1))
  // of min(max_backoff, first_backoff * 2^(attempt-1)), at least the
  // pushback `status` carries.
  absl::Duration Backoff(int attempt, const absl::Status& status,
                         double unit) const;

  // `attempt` (handed its deadline: now + `attempt_timeout`, at least
  // min_attempt_timeout, cut to the run's) until it succeeds, fails for good,
  // has made max_attempts, or the run's deadline leaves no room for another
  // try; then its last status, saying which.
  template <typename T>
  absl::StatusOr<T> Run(
      absl::Duration attempt_timeout,
      const std::function<absl::StatusOr<T>(absl::Time deadline)>& attempt)
      const {
    attempt_timeout = std::max(attempt_timeout, options_.min_attempt_timeout);
    for (int n = 1;; ++n) {
      const absl::Time start = Now();
      const absl::Time deadline =
          std::min(start + attempt_timeout, options_.deadline);
      absl::StatusOr<T> out = attempt(deadline);
      if (out.ok()) return out;
      const absl::Status& failed = out.status();
      const bool cut_by_run =
          deadline == options_.deadline && absl::IsDeadlineExceeded(failed);
      if (cut_by_run) return AtDeadline(failed, n);
      if (!Retryable(failed)) return out;
      if (options_.max_attempts > 0 && n >= options_.max_attempts) {
        return AfterAttempts(failed, n);
      }
      const absl::Duration wait = Backoff(n, failed, Draw());
      if (Now() + wait >= options_.deadline) return AtDeadline(failed, n);
      retries_.fetch_add(1, std::memory_order_relaxed);
      if (options_.on_retry) options_.on_retry(failed, n, wait);
      Sleep(wait);
    }
  }

  // Retries made so far, by every call under this rule.
  int64_t retries() const { return retries_.load(std::memory_order_relaxed); }

 private:
  absl::Time Now() const;
  void Sleep(absl::Duration wait) const;
  double Draw() const;
  // `failed` as the run's deadline left it: same code, the message says so.
  static absl::Status AtDeadline(const absl::Status& failed, int attempts);
  // `failed` when the last allowed attempt failed: the message says so.
  static absl::Status AfterAttempts(const absl::Status& failed, int attempts);

  RetryOptions options_;
  mutable std::atomic<int64_t> retries_{0};
};

}  // namespace mesa_anyjev::client
