// The pushback a retryable refusal carries from where the daemon refuses to
// the call's trailer (common/status/retry_after.h).
#include "common/status/retry_after.h"

#include <catch2/catch.hpp>

#include "common/status/status_macros.h"

namespace mesa_anyjev {
namespace {

absl::Status Refuse() {
  return WithRetryAfter(absl::ResourceExhaustedError("queue full"),
                        absl::Milliseconds(150));
}

absl::StatusOr<int> PassedOn() {
  RETURN_IF_ERROR(Refuse());
  return 1;
}

}  // namespace

TEST_CASE("A refusal keeps its wait, code and message", "[retry_after]") {
  const absl::Status status = Refuse();
  CHECK(absl::IsResourceExhausted(status));
  CHECK(status.message() == "queue full");
  REQUIRE(RetryAfter(status).has_value());
  CHECK(*RetryAfter(status) == absl::Milliseconds(150));
}

TEST_CASE("The wait survives RETURN_IF_ERROR and StatusOr", "[retry_after]") {
  const absl::StatusOr<int> out = PassedOn();
  REQUIRE_FALSE(out.ok());
  CHECK(RetryAfter(out.status()) == absl::Milliseconds(150));
}

TEST_CASE("No wait unless one was attached; OK stays plain", "[retry_after]") {
  CHECK_FALSE(RetryAfter(absl::InvalidArgumentError("bad")).has_value());
  CHECK_FALSE(
      RetryAfter(absl::ResourceExhaustedError("too large")).has_value());
  const absl::Status ok = WithRetryAfter(absl::OkStatus(), absl::Seconds(1));
  CHECK(ok.ok());
  CHECK_FALSE(RetryAfter(ok).has_value());
  // A negative wait is no wait at all: retry at once.
  CHECK(RetryAfter(WithRetryAfter(absl::UnavailableError("x"),
                                  absl::Milliseconds(-5))) ==
        absl::ZeroDuration());
}

}  // namespace mesa_anyjev
