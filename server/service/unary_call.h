// One unary callback-API call: counts itself in flight from arrival until
// gRPC is done with it, records its outcome in the metrics, and turns the
// caller's cancel into a flag the engine and the decision workers poll.
// Our methods take the request as bytes (request_parse.h): Parse gives the
// handler its typed request and response, owned by the call, and Complete
// writes the response bytes, and the trailer `grpc-retry-pushback-ms` when
// the refusal says how long to wait (common/status/retry_after.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/status/retry_after.h"
#include "server/metrics/metrics.h"
#include "server/service/call_admission.h"
#include "server/service/request_parse.h"
#include "server/service/status_convert.h"

namespace mesa_anyjev::service {

class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(grpc::CallbackServerContext* context,
            metrics::ServerMetrics* metrics, metrics::Method method)
      : context_(context),
        metrics_(metrics),
        method_(method),
        start_(absl::Now()) {
    metrics_->AddInflight(1);
  }

  void OnCancel() override { cancelled_.store(true); }

  // Once admitted: the tenant and class its outcome and refusals are
  // counted under.
  void Admitted(const std::string& tenant, Priority priority) {
    tenant_ = tenant;
    priority_ = priority;
    admitted_ = true;
  }
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
    if (admitted_) {
      metrics_->RecordTenantRequest(tenant_, priority_, status.raw_code());
    }
    if (const auto after = RetryAfter(status); after.has_value()) {
      context_->AddTrailingMetadata(
          "grpc-retry-pushback-ms",
          std::to_string(absl::ToInt64Milliseconds(*after)));
    }
    Finish(ToGrpcStatus(status));
  }

  // The engine's answer to this call's work: OK leaves the call to its
  // worker; a refusal (a limit, draining, the model's check of the input)
  // completes the call, and a full engine or a drain is counted.
  void Submitted(const absl::Status& submitted) {
    if (submitted.ok()) return;
    if (absl::IsResourceExhausted(submitted)) {
      metrics_->RecordRejected("queue_full", tenant_);
    } else if (absl::IsUnavailable(submitted)) {
      metrics_->RecordRejected("draining", tenant_);
    }
    Complete(submitted);
  }

  const std::atomic<bool>* cancelled() const { return &cancelled_; }

 private:
  grpc::CallbackServerContext* const context_;
  metrics::ServerMetrics* const metrics_;
  const metrics::Method method_;
  const absl::Time start_;
  std::atomic<bool> cancelled_{false};
  bool admitted_ = false;
  std::string tenant_;
  Priority priority_ = Priority::kInteractive;
  std::unique_ptr<google::protobuf::Message> request_;
  std::unique_ptr<google::protobuf::Message> response_;
  grpc::ByteBuffer* raw_response_ = nullptr;
};

// A handler's call once opened: who it is for and its class, what the
// service's own admission handed over (the model, the decider) and the
// typed request and response; !ok() when the call was already completed
// with the refusal.
template <typename Request, typename Response, typename Admitted>
struct OpenedCall {
  UnaryCall* call;
  CallAdmission admission{};
  Admitted admitted{};
  const Request* request = nullptr;
  Response* response = nullptr;

  bool ok() const { return request != nullptr; }
};

// Every handler's opening, in one place: the gate (token, role, class,
// serving state; call_admission.h), then the service's own admission (a
// model, a decider), both decided before any request byte is read; a
// refusal completes the call. Else the bytes are parsed. The call counts
// in flight from here until gRPC is done with it.
template <typename Request, typename Response, typename Admitted>
OpenedCall<Request, Response, Admitted> OpenCall(
    grpc::CallbackServerContext* context, metrics::ServerMetrics* metrics,
    metrics::Method method, const CallGate& gate,
    absl::StatusOr<Admitted> admitted, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  OpenedCall<Request, Response, Admitted> out{
      new UnaryCall(context, metrics, method)};
  auto admission = AdmitCall(*context, method, gate, metrics);
  if (!admission.ok()) {
    out.call->Complete(admission.status());
    return out;
  }
  out.call->Admitted(admission->caller.tenant_name(), admission->priority);
  if (!admitted.ok()) {
    out.call->Complete(admitted.status());
    return out;
  }
  out.admission = *std::move(admission);
  out.admitted = *std::move(admitted);
  std::tie(out.request, out.response) =
      out.call->template Parse<Request, Response>(raw_request, raw_response);
  return out;
}

// The same where the service's admission hands nothing over.
template <typename Request, typename Response>
OpenedCall<Request, Response, std::monostate> OpenCall(
    grpc::CallbackServerContext* context, metrics::ServerMetrics* metrics,
    metrics::Method method, const CallGate& gate,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return OpenCall<Request, Response, std::monostate>(context, metrics, method,
                                                     gate, std::monostate{},
                                                     raw_request, raw_response);
}

}  // namespace mesa_anyjev::service
