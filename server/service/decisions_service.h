// mesa.anyjev.v1.Decisions on gRPC's callback API. A handler checks the
// token, role and state and validates on the gRPC thread, then hands the call
// to a decision worker; the worker runs the Decider over the served Backend,
// whose model calls are engine jobs (server/engine/queued_backend.h) of the
// caller's tenant and class, and finishes the call. No gRPC thread waits on
// the model. Export, load and reset touch no model and answer inline.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/decision/decider.h"
#include "mesa/anyjev/v1/decisions.grpc.pb.h"
#include "server/metrics/metrics.h"
#include "server/service/bundles_service.h"
#include "server/service/call_admission.h"
#include "server/service/decision_workers.h"
#include "server/service/unary_call.h"

namespace mesa_anyjev::service {

struct DecisionsOptions {
  config::LimitsConfig limits;
  config::DecisionsConfig decisions;
  absl::Duration default_deadline = absl::Seconds(30);
  absl::Duration max_deadline = absl::Seconds(120);
  int32_t queue_capacity = 64;  // calls waiting for a decision worker
  bool fair_workers = true;     // false with engine.scheduler: fifo
};

// Every method takes its request as bytes (request_parse.h).
using RawServiceDecisions =
    ::mesa::anyjev::v1::Decisions::WithRawCallbackMethod_Decide<
        ::mesa::anyjev::v1::Decisions::WithRawCallbackMethod_Fit<
            ::mesa::anyjev::v1::Decisions::
                WithRawCallbackMethod_ExportArtifacts<
                    ::mesa::anyjev::v1::Decisions::
                        WithRawCallbackMethod_LoadArtifacts<
                            ::mesa::anyjev::v1::Decisions::
                                WithRawCallbackMethod_ResetPriors<
                                    ::mesa::anyjev::v1::Decisions::
                                        WithRawCallbackMethod_ListQuestions<
                                            ::mesa::anyjev::v1::Decisions::
                                                Service>>>>>>;

class DecisionsService final : public RawServiceDecisions {
 public:
  // `bundles` (may be null) says which bundle versions ListQuestions names.
  DecisionsService(DecisionsOptions options, metrics::ServerMetrics* metrics,
                   CallGate gate, const BundlesService* bundles = nullptr);
  ~DecisionsService() override;

  // The loaded model, served through the engine (it outlives the
  // service): builds the decider over it and loads
  // decisions.artifacts. INVALID_ARGUMENT (naming the key) when the file
  // does not load; calls before success get UNAVAILABLE.
  absl::Status SetBackend(Backend* backend);
  // The decider SetBackend built (null before): the Bundles service loads
  // promoted versions into it.
  decision::Decider* decider() const { return decider_.get(); }
  // Finishes accepted calls and joins the workers; call after the gRPC
  // server has shut down and before the engine stops.
  void Stop();

  grpc::ServerUnaryReactor* Decide(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw_request,
                                   grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Fit(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* raw_request,
                                grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* ExportArtifacts(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* LoadArtifacts(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* ResetPriors(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* ListQuestions(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;

 private:
  // A call that touches no model (export, load, reset, list): admitted,
  // parsed and answered by `answer(admission, decider, request, response)`
  // on the gRPC thread.
  template <typename Request, typename Response, typename Answer>
  grpc::ServerUnaryReactor* Inline(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw_request,
                                   grpc::ByteBuffer* raw_response,
                                   metrics::Method method, Answer answer);
  // The decider to use, or UNAVAILABLE before the model is loaded.
  absl::StatusOr<decision::Decider*> ServingDecider() const;
  absl::Time Deadline(const grpc::CallbackServerContext& context) const;
  // A Decide's or Fit's deadline, cancellation, prompt bounds, tenant and
  // class.
  CallControl DecisionControl(const grpc::CallbackServerContext& context,
                              const UnaryCall& call,
                              const CallAdmission& admission) const;
  TokenBudget DecisionBudget() const;  // limits.max_decide_tokens
  // A heads/export file in a request: size-capped, UTF-8, JSON.
  absl::StatusOr<nlohmann::ordered_json> ParseArtifactsJson(
      const std::string& bytes) const;

  const DecisionsOptions options_;
  metrics::ServerMetrics* const metrics_;
  const CallGate gate_;
  const BundlesService* const bundles_;
  DecisionWorkers workers_;
  Backend* queued_ = nullptr;  // the served model (SetBackend)
  std::unique_ptr<decision::Decider> decider_;
  std::atomic<decision::Decider*> ready_{nullptr};
};

}  // namespace mesa_anyjev::service
