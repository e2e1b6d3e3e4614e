#include "server/service/inference_service.h"

#include <chrono>
#include <utility>

#include "server/service/request_convert.h"
#include "server/service/status_convert.h"

namespace mesa_anyjev::service {

namespace v1 = ::mesa::anyjev::v1;
using metrics::Method;

// One unary call: counts itself in flight from arrival until gRPC is done
// with it, records its outcome, and turns the caller's cancel into a flag the
// engine polls.
class InferenceService::Call final : public grpc::ServerUnaryReactor {
 public:
  Call(metrics::ServerMetrics* metrics, Method method)
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
  const Method method_;
  const absl::Time start_;
  std::atomic<bool> cancelled_{false};
};

InferenceService::InferenceService(InferenceOptions options,
                                   engine::Scheduler* scheduler,
                                   metrics::ServerMetrics* metrics,
                                   const BearerAuth* auth,
                                   const ServingStateFlag* state)
    : options_(std::move(options)),
      scheduler_(scheduler),
      metrics_(metrics),
      auth_(auth),
      state_(state) {}

absl::StatusOr<Backend*> InferenceService::Admit(
    const grpc::CallbackServerContext& context) {
  if (absl::Status status = auth_->Check(context); !status.ok()) {
    metrics_->RecordRejected("unauthenticated");
    return status;
  }
  switch (state_->get()) {
    case ServingState::kLoading:
      metrics_->RecordRejected("loading");
      return absl::UnavailableError("the model is still loading; retry later");
    case ServingState::kDraining:
      metrics_->RecordRejected("draining");
      return absl::UnavailableError("the daemon is draining; retry elsewhere");
    case ServingState::kServing:
      break;
  }
  Backend* backend = backend_.load();
  if (backend == nullptr) return absl::UnavailableError("no model loaded");
  return backend;
}

absl::Time InferenceService::Deadline(
    const grpc::CallbackServerContext& context) const {
  const absl::Time now = absl::Now();
  const absl::Time cap = now + options_.max_deadline;
  const auto client = context.deadline();
  if (client == std::chrono::system_clock::time_point::max()) {
    return now + options_.default_deadline;  // the caller set none
  }
  return std::min(absl::FromChrono(client), cap);
}

void InferenceService::Submit(
    Call* call, absl::Time deadline,
    std::function<absl::Status(const CallControl&)> run) {
  engine::Job job;
  job.deadline = deadline;
  job.cancelled = call->cancelled();
  job.run = std::move(run);
  job.done = [call](absl::Status status) { call->Complete(status); };
  absl::Status status = scheduler_->TrySubmit(std::move(job));
  if (!status.ok()) {
    metrics_->RecordRejected(absl::IsResourceExhausted(status) ? "queue_full"
                                                               : "draining");
    call->Complete(status);
  }
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(
    grpc::CallbackServerContext* context, const v1::GetModelInfoRequest*,
    v1::ModelInfo* response) {
  auto* call = new Call(metrics_, Method::kGetModelInfo);
  auto backend = Admit(*context);
  if (backend.ok()) {
    FillModelInfo((*backend)->identity(), (*backend)->capabilities(),
                  options_.limits, response);
  }
  call->Complete(backend.status());
  return call;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(
    grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
    v1::TokenizeResponse* response) {
  auto* call = new Call(metrics_, Method::kTokenize);
  auto backend = Admit(*context);
  if (!backend.ok()) {
    call->Complete(backend.status());
    return call;
  }
  auto ids =
      ParseTokenizeRequest(*request, (*backend)->tokenizer(), options_.limits);
  if (ids.ok()) {
    for (const auto& item : *ids) {
      response->add_items()->mutable_ids()->Add(item.begin(), item.end());
    }
  }
  call->Complete(ids.status());
  return call;
}

grpc::ServerUnaryReactor* InferenceService::Logprobs(
    grpc::CallbackServerContext* context, const v1::LogprobsRequest* request,
    v1::LogprobsResponse* response) {
  auto* call = new Call(metrics_, Method::kLogprobs);
  auto backend = Admit(*context);
  if (!backend.ok()) {
    call->Complete(backend.status());
    return call;
  }
  Backend* model = *backend;
  absl::Status status = CheckTopK(
      request->top_k(), model->capabilities().vocab_size, options_.limits);
  auto parsed =
      status.ok()
          ? ParseGroups(request->groups(), model->tokenizer(), options_.limits,
                        /*label_vocab=*/model->capabilities().vocab_size)
          : absl::StatusOr<ParsedGroups>(status);
  if (parsed.ok() && request->top_k() == 0) {
    for (const PromptGroup& group : parsed->groups) {
      if (group.label_ids.empty()) {
        parsed = absl::InvalidArgumentError(
            "groups: every group needs label_ids unless top_k > 0");
        break;
      }
    }
  }
  if (!parsed.ok()) {
    call->Complete(parsed.status());
    return call;
  }
  metrics_->AddPromptTokens(static_cast<double>(parsed->n_tokens));
  Submit(call, Deadline(*context),
         [model, groups = std::move(parsed->groups), top_k = request->top_k(),
          response](const CallControl& control) -> absl::Status {
           auto result = model->Logprobs(groups, top_k, control);
           if (!result.ok()) return result.status();
           FillLogprobs(*result, response);
           return absl::OkStatus();
         });
  return call;
}

grpc::ServerUnaryReactor* InferenceService::HiddenStates(
    grpc::CallbackServerContext* context,
    const v1::HiddenStatesRequest* request,
    v1::HiddenStatesResponse* response) {
  auto* call = new Call(metrics_, Method::kHiddenStates);
  auto backend = Admit(*context);
  if (!backend.ok()) {
    call->Complete(backend.status());
    return call;
  }
  Backend* model = *backend;
  if (!model->capabilities().hidden_states) {
    call->Complete(
        absl::FailedPreconditionError("this model serves no hidden states"));
    return call;
  }
  auto parsed = ParseGroups(request->groups(), model->tokenizer(),
                            options_.limits, /*label_vocab=*/0);
  if (!parsed.ok()) {
    call->Complete(parsed.status());
    return call;
  }
  auto layers =
      ParseLayers(request->layers(), model->capabilities(), options_.limits,
                  parsed->n_prompts, options_.max_send_bytes);
  if (!layers.ok()) {
    call->Complete(layers.status());
    return call;
  }
  metrics_->AddPromptTokens(static_cast<double>(parsed->n_tokens));
  Submit(
      call, Deadline(*context),
      [model, groups = std::move(parsed->groups), layers = *std::move(layers),
       response](const CallControl& control) -> absl::Status {
        auto result = model->HiddenStates(groups, layers, control);
        if (!result.ok()) return result.status();
        FillHiddenStates(*result, response);
        return absl::OkStatus();
      });
  return call;
}

}  // namespace mesa_anyjev::service
