// One unary callback-API call: counts itself in flight from arrival until
// gRPC is done with it, records its outcome in the metrics, and turns the
// caller's cancel into a flag the engine and the decision workers poll.
// Our methods take the request as bytes (request_parse.h): Parse gives the
// handler its typed request and response, owned by the call, and Complete
// writes the response bytes.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "server/metrics/metrics.h"
#include "server/service/request_parse.h"
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

  // The typed request parsed from `raw` and an empty response, both living
  // as long as the call; {nullptr, nullptr} after completing the call with
  // INVALID_ARGUMENT when the bytes do not parse.
  template <typename Request, typename Response>
  std::pair<const Request*, Response*> Parse(const grpc::ByteBuffer* raw,
                                             grpc::ByteBuffer* raw_response) {
    auto request = std::make_unique<Request>();
    if (absl::Status parsed = ParseRequest(*raw, request.get()); !parsed.ok()) {
      Complete(parsed);
      return {nullptr, nullptr};
    }
    auto response = std::make_unique<Response>();
    std::pair<const Request*, Response*> out{request.get(), response.get()};
    request_ = std::move(request);
    response_ = std::move(response);
    raw_response_ = raw_response;
    return out;
  }

  // Exactly once per call; the object may be gone when this returns.
  void Complete(absl::Status status) {
    if (status.ok() && response_ != nullptr) {
      status = SerializeResponse(*response_, raw_response_);
    }
    metrics_->RecordRequest(method_, status.raw_code(), absl::Now() - start_);
    Finish(ToGrpcStatus(status));
  }

  const std::atomic<bool>* cancelled() const { return &cancelled_; }

 private:
  metrics::ServerMetrics* const metrics_;
  const metrics::Method method_;
  const absl::Time start_;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<google::protobuf::Message> request_;
  std::unique_ptr<google::protobuf::Message> response_;
  grpc::ByteBuffer* raw_response_ = nullptr;
};

}  // namespace mesa_anyjev::service
