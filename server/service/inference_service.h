// mesa.anyjev.v1.Inference on gRPC's callback API. Handlers check the token,
// role and state, validate, hand the work to the engine as the caller's
// tenant and class, and return. The engine hands each call's output to the
// service's reply thread, which builds and writes the response, so the engine
// goes on at once. No handler blocks while the model runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/time/time.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "mesa/anyjev/v1/inference.grpc.pb.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"
#include "server/service/call_admission.h"
#include "server/service/worker_pool.h"

namespace mesa_anyjev::service {

class UnaryCall;

struct InferenceOptions {
  config::LimitsConfig limits;
  absl::Duration default_deadline = absl::Seconds(30);
  absl::Duration max_deadline = absl::Seconds(120);
  int64_t max_send_bytes = 64 << 20;
};

// Every method takes its request as bytes (request_parse.h).
using RawServiceInference =
    ::mesa::anyjev::v1::Inference::WithRawCallbackMethod_GetModelInfo<
        ::mesa::anyjev::v1::Inference::WithRawCallbackMethod_Tokenize<
            ::mesa::anyjev::v1::Inference::WithRawCallbackMethod_Logprobs<
                ::mesa::anyjev::v1::Inference::
                    WithRawCallbackMethod_HiddenStates<
                        ::mesa::anyjev::v1::Inference::Service>>>>;

class InferenceService final : public RawServiceInference {
 public:
  InferenceService(InferenceOptions options, engine::Engine* engine,
                   metrics::ServerMetrics* metrics, CallGate gate);

  // The backend once loaded; calls before it get UNAVAILABLE.
  void SetBackend(Backend* backend) { backend_.store(backend); }
  // Once the engine has stopped: writes the replies it handed over, then
  // joins the reply thread. Idempotent.
  void Stop() { replies_.Stop(); }

  grpc::ServerUnaryReactor* GetModelInfo(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* raw_request,
                                     grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Logprobs(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* raw_request,
                                     grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* HiddenStates(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;

 private:
  // The backend to use, or UNAVAILABLE before one is loaded.
  absl::StatusOr<Backend*> Model() const;
  absl::Time Deadline(const grpc::CallbackServerContext& context) const;
  // Hands the forward to the engine, or answers at once with
  // RESOURCE_EXHAUSTED / UNAVAILABLE when the queue refuses it. Its output
  // comes back to the reply thread, which `fill`s the response from it and
  // completes the call.
  void Submit(UnaryCall* call, const CallAdmission& admission,
              absl::Time deadline, engine::ForwardTask task,
              std::vector<PromptGroup> groups,
              std::function<void(const engine::ForwardOutput&)> fill);

  const InferenceOptions options_;
  engine::Engine* const engine_;
  metrics::ServerMetrics* const metrics_;
  const CallGate gate_;
  std::atomic<Backend*> backend_{nullptr};
  // One thread; every answer the engine hands over is taken (no capacity:
  // its job already passed admission).
  WorkerPool replies_{"logprobs reply", 1, std::numeric_limits<int32_t>::max()};
};

}  // namespace mesa_anyjev::service
