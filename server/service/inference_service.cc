#include "server/service/inference_service.h"

#include <chrono>
#include <utility>

#include "common/status/status_macros.h"
#include "common/util/meminfo.h"
#include "server/service/call_admission.h"
#include "server/service/request_convert.h"
#include "server/service/status_convert.h"
#include "server/service/unary_call.h"

namespace mesa_anyjev::service {

namespace v1 = ::mesa::anyjev::v1;
using metrics::Method;

InferenceService::InferenceService(InferenceOptions options,
                                   engine::Engine* engine,
                                   metrics::ServerMetrics* metrics,
                                   CallGate gate)
    : options_(std::move(options)),
      engine_(engine),
      metrics_(metrics),
      gate_(gate) {}

absl::StatusOr<Backend*> InferenceService::Model() const {
  Backend* backend = backend_.load();
  if (backend == nullptr) return absl::UnavailableError("no model loaded");
  return backend;
}

absl::Time InferenceService::Deadline(
    const grpc::CallbackServerContext& context) const {
  return CallDeadline(context, options_.default_deadline,
                      options_.max_deadline);
}

void InferenceService::Submit(
    UnaryCall* call, const CallAdmission& admission, absl::Time deadline,
    engine::ForwardTask task, std::vector<PromptGroup> groups,
    std::function<void(const engine::ForwardOutput&)> fill) {
  // `done` runs on the engine thread: a plain handoff of the output to the
  // reply thread.
  auto done = [this, call, fill = std::move(fill)](
                  absl::StatusOr<engine::ForwardOutput> out) {
    const absl::Status posted =
        replies_.TrySubmit([call, fill, out = std::move(out)] {
          if (out.ok()) fill(*out);
          call->Complete(out.status());
        });
    // Refused only once the replies have stopped, after the engine.
    if (!posted.ok()) call->Complete(posted);
  };
  call->Submitted(engine_->TrySubmit(
      {std::move(task), std::move(groups),
       Caller{deadline, call->cancelled(), admission.caller.tenant_name(),
              admission.priority},
       std::move(done)}));
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const auto opened = OpenCall<v1::GetModelInfoRequest, v1::ModelInfo>(
      context, metrics_, Method::kGetModelInfo, gate_, Model(), raw_request,
      raw_response);
  if (!opened.ok()) return opened.call;
  const Backend* model = opened.admitted;
  FillModelInfo(model->identity(), model->capabilities(), options_.limits,
                opened.response);
  FillDeviceInfo(model->device_info(), util::ReadMemAvailable(),
                 opened.response);
  FillCallerInfo(gate_.auth->enabled(), opened.admission.caller.tenant(),
                 opened.admission.priority, opened.response);
  opened.call->Complete(absl::OkStatus());
  return opened.call;
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const auto opened = OpenCall<v1::TokenizeRequest, v1::TokenizeResponse>(
      context, metrics_, Method::kTokenize, gate_, Model(), raw_request,
      raw_response);
  if (!opened.ok()) return opened.call;
  UnaryCall* call = opened.call;
  const v1::TokenizeRequest& request = *opened.request;
  v1::TokenizeResponse* response = opened.response;
  Backend* model = opened.admitted;
  auto ids = ParseTokenizeRequest(request, model->tokenizer(), options_.limits);
  if (ids.ok()) {
    for (const auto& item : *ids) {
      response->add_items()->mutable_ids()->Add(item.begin(), item.end());
    }
  }
  call->Complete(ids.status());
  return call;
}

grpc::ServerUnaryReactor* InferenceService::Logprobs(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const auto opened = OpenCall<v1::LogprobsRequest, v1::LogprobsResponse>(
      context, metrics_, Method::kLogprobs, gate_, Model(), raw_request,
      raw_response);
  if (!opened.ok()) return opened.call;
  UnaryCall* call = opened.call;
  const v1::LogprobsRequest& request = *opened.request;
  v1::LogprobsResponse* response = opened.response;
  Backend* model = opened.admitted;
  absl::Status status = CheckTopK(
      request.top_k(), model->capabilities().vocab_size, options_.limits);
  auto parsed =
      status.ok()
          ? ParseGroups(request.groups(), model->tokenizer(), options_.limits,
                        /*label_vocab=*/model->capabilities().vocab_size)
          : absl::StatusOr<ParsedGroups>(status);
  if (parsed.ok() && request.top_k() == 0) {
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
  Submit(call, opened.admission, Deadline(*context),
         engine::LogprobsTask{request.top_k()}, std::move(parsed->groups),
         [response](const engine::ForwardOutput& out) {
           FillLogprobs(std::get<engine::GroupLogprobs>(out), response);
         });
  return call;
}

grpc::ServerUnaryReactor* InferenceService::HiddenStates(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const auto opened =
      OpenCall<v1::HiddenStatesRequest, v1::HiddenStatesResponse>(
          context, metrics_, Method::kHiddenStates, gate_, Model(), raw_request,
          raw_response);
  if (!opened.ok()) return opened.call;
  UnaryCall* call = opened.call;
  const v1::HiddenStatesRequest& request = *opened.request;
  v1::HiddenStatesResponse* response = opened.response;
  Backend* model = opened.admitted;
  if (!model->capabilities().hidden_states) {
    call->Complete(
        absl::FailedPreconditionError("this model serves no hidden states"));
    return call;
  }
  auto parsed = ParseGroups(request.groups(), model->tokenizer(),
                            options_.limits, /*label_vocab=*/0);
  if (!parsed.ok()) {
    call->Complete(parsed.status());
    return call;
  }
  auto layers =
      ParseLayers(request.layers(), model->capabilities(), options_.limits,
                  parsed->n_prompts, options_.max_send_bytes);
  if (!layers.ok()) {
    call->Complete(layers.status());
    return call;
  }
  metrics_->AddPromptTokens(static_cast<double>(parsed->n_tokens));
  Submit(call, opened.admission, Deadline(*context),
         engine::HiddenStatesTask{*std::move(layers)},
         std::move(parsed->groups),
         [response](const engine::ForwardOutput& out) {
           FillHiddenStates(std::get<HiddenStatesResult>(out), response);
         });
  return call;
}

}  // namespace mesa_anyjev::service
