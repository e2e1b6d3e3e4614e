// The retry rule (see retry_rule.h).
#include "client/backends/retry_rule.h"

#include <cmath>
#include <random>

#include "absl/time/clock.h"
#include "common/status/retry_after.h"

namespace mesa_anyjev::client {

RetryRule::RetryRule(RetryOptions options) : options_(std::move(options)) {}

bool RetryRule::Retryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    case absl::StatusCode::kResourceExhausted:
      // Without the pushback it is a limit (a message or a prompt group too
      // large): the same call would be refused again.
      return RetryAfter(status).has_value();
    default:
      return false;
  }
}

absl::Duration RetryRule::Backoff(int attempt, const absl::Status& status,
                                  double unit) const {
  const int doublings = std::clamp(attempt - 1, 0, 30);
  const absl::Duration ceiling =
      std::min(options_.max_backoff,
               options_.first_backoff * std::ldexp(1.0, doublings));
  const absl::Duration jittered = ceiling * std::clamp(unit, 0.0, 1.0);
  return std::max(jittered, RetryAfter(status).value_or(absl::ZeroDuration()));
}

absl::Time RetryRule::Now() const {
  return options_.now ? options_.now() : absl::Now();
}

void RetryRule::Sleep(absl::Duration wait) const {
  if (options_.sleep) {
    options_.sleep(wait);
  } else {
    absl::SleepFor(wait);
  }
}

double RetryRule::Draw() const {
  if (options_.draw) return options_.draw();
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

absl::Status RetryRule::AtDeadline(const absl::Status& failed, int attempts) {
  return absl::Status(
      failed.code(),
      absl::StrCat(failed.message(), " (the run's deadline, --deadline, ",
                   "left no time after ", attempts,
                   attempts == 1 ? " attempt)" : " attempts)"));
}

absl::Status RetryRule::AfterAttempts(const absl::Status& failed,
                                      int attempts) {
  return absl::Status(failed.code(), absl::StrCat(failed.message(), " (",
                                                  attempts, " attempts)"));
}

}  // namespace mesa_anyjev::client
