#include "common/status/retry_after.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace mesa_anyjev {
namespace {

// absl::Status payloads are keyed by a type URL; the value is the decimal
// milliseconds, as the trailer carries them.
constexpr char kRetryAfterUrl[] = "mesa-anyjev/retry-after-ms";

}  // namespace

absl::Status WithRetryAfter(absl::Status status, absl::Duration after) {
  if (status.ok()) return status;
  const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(after));
  status.SetPayload(kRetryAfterUrl, absl::Cord(std::to_string(ms)));
  return status;
}

std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterUrl);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms) ||
      ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

}  // namespace mesa_anyjev
