// The half-open circuit breaker (see circuit_breaker.h).
#include "common/gateway/circuit_breaker.h"

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::gateway {

absl::StatusOr<uint64_t> CircuitBreaker::Check(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!opened_at_.has_value()) return uint64_t{0};
  if (now - *opened_at_ < open_for_) {
    return absl::UnavailableError(absl::StrCat(
        "gateway circuit breaker is open (", failures_,
        " consecutive failures; retry after ",
        absl::FormatDuration(open_for_ - (now - *opened_at_)), ")"));
  }
  // Half-open: one probe at a time decides.
  if (probe_ != 0) {
    return absl::UnavailableError(
        "gateway circuit breaker is half-open: a probe call is deciding");
  }
  probe_ = ++probes_;
  return probe_;
}

void CircuitBreaker::Failure(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  ++failures_;
  if (probe_ != 0) {
    probe_ = 0;
    opened_at_ = now;  // the probe failed: open again for the full period
  } else if (failures_ >= failures_to_open_ && !opened_at_.has_value()) {
    opened_at_ = now;
  }
}

void CircuitBreaker::Success() {
  std::lock_guard<std::mutex> lock(mu_);
  failures_ = 0;
  opened_at_.reset();
  probe_ = 0;
}

void CircuitBreaker::Release(uint64_t probe) {
  std::lock_guard<std::mutex> lock(mu_);
  if (probe != 0 && probe == probe_) probe_ = 0;
}

bool CircuitBreaker::open(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  return opened_at_.has_value() &&
         (now - *opened_at_ < open_for_ || probe_ != 0);
}

}  // namespace mesa_anyjev::gateway
