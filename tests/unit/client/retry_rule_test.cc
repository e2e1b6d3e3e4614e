// The CLI's one retry rule (client/backends/retry_rule.h): what is sent
// again, how long it waits, and where it stops; on a fake clock.
#include "client/backends/retry_rule.h"

#include <catch2/catch.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "common/status/retry_after.h"

namespace mesa_anyjev::client {
namespace {

using absl::Milliseconds;
using absl::Seconds;

// A clock that only the sleeps move.
struct FakeTime {
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  std::vector<absl::Duration> slept;

  RetryOptions Options(double draw = 0.5) {
    RetryOptions options;
    options.now = [this] { return now; };
    options.sleep = [this](absl::Duration d) {
      slept.push_back(d);
      now += d;
    };
    options.draw = [draw] { return draw; };
    return options;
  }
};

absl::Status QueueFull() {
  return WithRetryAfter(absl::ResourceExhaustedError("queue full"),
                        Milliseconds(300));
}

TEST_CASE("What the rule sends again, and what never", "[retry]") {
  CHECK(RetryRule::Retryable(absl::UnavailableError("draining")));
  CHECK(RetryRule::Retryable(absl::CancelledError("cut by the drain")));
  CHECK(RetryRule::Retryable(QueueFull()));
  // An attempt's own timeout (Run ends a run whose deadline cut it).
  CHECK(RetryRule::Retryable(absl::DeadlineExceededError("no answer")));
  // Without the pushback RESOURCE_EXHAUSTED is a size limit.
  CHECK_FALSE(RetryRule::Retryable(absl::ResourceExhaustedError("too large")));
  for (const absl::Status& final :
       {absl::InvalidArgumentError("x"), absl::PermissionDeniedError("x"),
        absl::UnauthenticatedError("x"), absl::FailedPreconditionError("x"),
        absl::NotFoundError("x"), absl::InternalError("x"),
        absl::UnimplementedError("x")}) {
    CHECK_FALSE(RetryRule::Retryable(final));
  }
}

TEST_CASE("Backoff: exponential, full jitter, never below the pushback",
          "[retry]") {
  RetryOptions options;  // 100 ms first, 10 s at most
  const RetryRule rule(options);
  const absl::Status gone = absl::UnavailableError("gone");
  CHECK(rule.Backoff(1, gone, 1.0) == Milliseconds(100));
  CHECK(rule.Backoff(2, gone, 1.0) == Milliseconds(200));
  CHECK(rule.Backoff(4, gone, 1.0) == Milliseconds(800));
  CHECK(rule.Backoff(4, gone, 0.5) == Milliseconds(400));
  CHECK(rule.Backoff(4, gone, 0.0) == absl::ZeroDuration());
  CHECK(rule.Backoff(30, gone, 1.0) == Seconds(10));
  CHECK(rule.Backoff(1000, gone, 1.0) == Seconds(10));
  // The daemon's pushback is the least wait, whatever the draw.
  CHECK(rule.Backoff(1, QueueFull(), 0.0) == Milliseconds(300));
  CHECK(rule.Backoff(8, QueueFull(), 1.0) == Seconds(10));
}

TEST_CASE("A retried call ends at its first success", "[retry]") {
  FakeTime time;
  std::vector<absl::Status> seen;
  RetryOptions options = time.Options(/*draw=*/1.0);
  options.on_retry = [&](const absl::Status& s, int, absl::Duration) {
    seen.push_back(s);
  };
  const RetryRule rule(options);
  int attempts = 0;
  auto out = rule.Run<int>(Seconds(30), [&](absl::Time deadline) {
    CHECK(deadline == time.now + Seconds(30));
    ++attempts;
    if (attempts == 1) return absl::StatusOr<int>(QueueFull());
    if (attempts == 2) return absl::StatusOr<int>(absl::UnavailableError("x"));
    return absl::StatusOr<int>(7);
  });
  REQUIRE(out.ok());
  CHECK(*out == 7);
  CHECK(attempts == 3);
  CHECK(rule.retries() == 2);
  CHECK(seen.size() == 2);
  CHECK(time.slept ==
        std::vector<absl::Duration>{Milliseconds(300), Milliseconds(200)});
}

TEST_CASE("A final status is answered at once", "[retry]") {
  FakeTime time;
  const RetryRule rule(time.Options());
  int attempts = 0;
  auto out = rule.Run<int>(Seconds(30), [&](absl::Time) {
    ++attempts;
    return absl::StatusOr<int>(absl::InvalidArgumentError("states[0]: bad"));
  });
  CHECK(absl::IsInvalidArgument(out.status()));
  CHECK(out.status().message() == "states[0]: bad");
  CHECK(attempts == 1);
  CHECK(time.slept.empty());
}

TEST_CASE("The run's deadline bounds attempts and retries", "[retry]") {
  FakeTime time;
  RetryOptions options = time.Options(/*draw=*/1.0);
  options.deadline = time.now + Seconds(2);
  const RetryRule rule(options);
  std::vector<absl::Time> deadlines;
  auto out = rule.Run<int>(Seconds(30), [&](absl::Time deadline) {
    deadlines.push_back(deadline);
    return absl::StatusOr<int>(absl::UnavailableError("connection refused"));
  });
  CHECK(absl::IsUnavailable(out.status()));
  CHECK(absl::StrContains(out.status().message(), "connection refused"));
  CHECK(absl::StrContains(out.status().message(), "--deadline"));
  // Each attempt ends by the run's deadline, not 30 s later.
  for (const absl::Time d : deadlines) CHECK(d == options.deadline);
  CHECK(time.now < options.deadline);  // no wait past it
  CHECK(deadlines.size() == 5);        // 0.1 + 0.2 + 0.4 + 0.8 s waited

  // An attempt the run's deadline cut is not sent again.
  FakeTime late;
  RetryOptions cut = late.Options();
  cut.deadline = late.now + Seconds(1);
  int attempts = 0;
  auto timed_out = RetryRule(cut).Run<int>(Seconds(30), [&](absl::Time) {
    ++attempts;
    late.now += Seconds(1);
    return absl::StatusOr<int>(absl::DeadlineExceededError("no answer"));
  });
  CHECK(absl::IsDeadlineExceeded(timed_out.status()));
  CHECK(absl::StrContains(timed_out.status().message(), "--deadline"));
  CHECK(attempts == 1);
}

TEST_CASE("An attempt gets at least min_attempt_timeout", "[retry]") {
  FakeTime time;
  RetryOptions options = time.Options();
  options.min_attempt_timeout = Seconds(120);
  std::vector<absl::Time> deadlines;
  auto attempt = [&](absl::Time deadline) {
    deadlines.push_back(deadline);
    return absl::StatusOr<int>(7);
  };
  const RetryRule rule(options);
  REQUIRE(rule.Run<int>(Seconds(30), attempt).ok());   // raised to 120 s
  REQUIRE(rule.Run<int>(Seconds(300), attempt).ok());  // a longer one kept
  CHECK(deadlines == std::vector<absl::Time>{time.now + Seconds(120),
                                             time.now + Seconds(300)});
}

TEST_CASE("A call is tried at most max_attempts times", "[retry]") {
  FakeTime time;
  const RetryRule rule(time.Options());  // 30 attempts, no deadline
  int attempts = 0;
  auto out = rule.Run<int>(Seconds(30), [&](absl::Time) {
    ++attempts;
    return absl::StatusOr<int>(absl::DeadlineExceededError("no answer"));
  });
  CHECK(absl::IsDeadlineExceeded(out.status()));
  CHECK(out.status().message() == "no answer (30 attempts)");
  CHECK(attempts == 30);
  CHECK(rule.retries() == 29);
}

}  // namespace
}  // namespace mesa_anyjev::client
