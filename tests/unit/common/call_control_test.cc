// The one rule for a stopped caller (CallPart::StopStatus) and a merged
// call's (CallControl::StopStatus): the queue, the engine and the service
// all answer with it.
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
  CallPart part{0, kNow + absl::Seconds(1), &cancelled};
  CHECK(part.StopStatus(kNow, "here").ok());
  CHECK(part.StopStatus(kNow + absl::Seconds(1), "here").code() ==
        absl::StatusCode::kDeadlineExceeded);
  cancelled = true;
  // Cancelled wins over a passed deadline: the caller left first or not,
  // nobody waits for the answer.
  const absl::Status s = part.StopStatus(kNow + absl::Seconds(2), "the queue");
  CHECK(s.code() == absl::StatusCode::kCancelled);
  CHECK(absl::StartsWith(s.message(), "the queue: "));
  CHECK(CallPart{}.StopStatus(kNow, "x").ok());  // no deadline, no flag
}

TEST_CASE("A merged call's status says how its callers stopped",
          "[call_control]") {
  std::atomic<bool> first{false}, second{false};
  CallControl control;
  control.parts = {{0, kNow + absl::Seconds(1), &first},
                   {1, kNow + absl::Seconds(5), &second}};
  CHECK(control.StopStatus(kNow, "f").ok());
  CHECK_FALSE(control.ShouldStop(kNow));

  // One caller gone, one waiting: the call goes on.
  CHECK(control.StopStatus(kNow + absl::Seconds(2), "f").ok());
  CHECK_FALSE(control.ShouldStop(kNow + absl::Seconds(2)));

  // Both out of time: late, not cancelled.
  const absl::Status late = control.StopStatus(kNow + absl::Seconds(6), "f");
  CHECK(late.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(late.message(), "every caller"));

  // Both cancelled, or one cancelled and one late: CANCELLED.
  first = true;
  CHECK(control.StopStatus(kNow + absl::Seconds(6), "f").code() ==
        absl::StatusCode::kCancelled);
  second = true;
  const absl::Status gone = control.StopStatus(kNow, "f");
  CHECK(gone.code() == absl::StatusCode::kCancelled);
  CHECK(absl::StrContains(gone.message(), "every caller"));
  CHECK(control.ShouldStop(kNow));

  // The call's own cancel or deadline comes first.
  std::atomic<bool> own{true};
  control.cancelled = &own;
  CHECK(absl::StrContains(control.StopStatus(kNow, "f").message(),
                          "the caller cancelled"));
}

}  // namespace mesa_anyjev
