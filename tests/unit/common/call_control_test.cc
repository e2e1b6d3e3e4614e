// The one rule for a stopped caller (Caller::StopStatus): the queue, the
// engine and the service all answer with it; a merged call's rule is the
// engine's (tests/unit/server/forward_call_test.cc).
#include <atomic>
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/backend.h"

namespace mesa_anyjev {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

}  // namespace

TEST_CASE("A caller who cancelled is CANCELLED, one out of time late",
          "[call_control]") {
  std::atomic<bool> cancelled{false};
  Caller caller{
      kNow + absl::Seconds(1), &cancelled, {}, Priority::kInteractive};
  CHECK(caller.StopStatus(kNow, "here").ok());
  CHECK(caller.StopStatus(kNow + absl::Seconds(1), "here").code() ==
        absl::StatusCode::kDeadlineExceeded);
  cancelled = true;
  // Cancelled wins over a passed deadline: the caller left first or not,
  // nobody waits for the answer.
  const absl::Status s =
      caller.StopStatus(kNow + absl::Seconds(2), "the queue");
  CHECK(s.code() == absl::StatusCode::kCancelled);
  CHECK(absl::StartsWith(s.message(), "the queue: "));
  CHECK(Caller{}.StopStatus(kNow, "x").ok());  // no deadline, no flag
}

TEST_CASE("A call's control answers for its caller", "[call_control]") {
  std::atomic<bool> own{false};
  CallControl control;
  control.deadline = kNow + absl::Seconds(1);
  control.cancelled = &own;
  CHECK_FALSE(control.ShouldStop(kNow));
  CHECK(control.StopStatus(kNow + absl::Seconds(1), "f").code() ==
        absl::StatusCode::kDeadlineExceeded);
  own = true;
  CHECK(control.ShouldStop(kNow));
  CHECK(absl::StrContains(control.StopStatus(kNow, "f").message(),
                          "f: the caller cancelled"));
}

}  // namespace mesa_anyjev
