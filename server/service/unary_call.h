// One unary callback-API call: counts itself in flight from arrival until
// gRPC is done with it, records its outcome in the metrics, and turns the
// caller's cancel into a flag the engine and the decision workers poll.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "server/metrics/metrics.h"
#include "server/service/status_convert.h"

namespace mesa_anyjev::service {

class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(metrics::ServerMetrics* metrics, metrics::Method method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {
    metrics_->AddInflight(1);
  }

  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override {
    metrics_->AddInflight(-1);
    delete this;
  }

  // Exactly once per call; the object may be gone when this returns.
  void Complete(const absl::Status& status) {
    metrics_->RecordRequest(method_, status.raw_code(), absl::Now() - start_);
    Finish(ToGrpcStatus(status));
  }

  const std::atomic<bool>* cancelled() const { return &cancelled_; }

 private:
  metrics::ServerMetrics* const metrics_;
  const metrics::Method method_;
  const absl::Time start_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace mesa_anyjev::service
