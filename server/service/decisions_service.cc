// The Decisions service (see decisions_service.h).
#include "server/service/decisions_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"
#include "common/util/daemon_target.h"
#include "common/util/files.h"
#include "server/service/call_admission.h"
#include "server/service/decision_convert.h"
#include "server/service/question_listing.h"
#include "server/service/unary_call.h"

namespace mesa_anyjev::service {

namespace v1 = ::mesa::anyjev::v1;
using metrics::Method;

namespace {

// Heads and export files, from a request or from decisions.artifacts.
absl::StatusOr<nlohmann::ordered_json> ParseJson(
    const std::string& bytes, const std::string& field,
    const text::JsonLimits& limits) {
  auto parsed = text::ParseStrictOrderedJson(bytes, limits);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", parsed.status().message()));
  }
  return parsed;
}

// Whose call a decision worker runs: the tenant's work in its class, at its
// weight.
DecisionWorkers::Owner WorkerOwner(const CallAdmission& admission) {
  const auth::Tenant* tenant = admission.caller.tenant();
  return {admission.caller.tenant_name(), admission.priority,
          tenant != nullptr ? tenant->weight : 1.0};
}

}  // namespace

DecisionsService::DecisionsService(DecisionsOptions options,
                                   metrics::ServerMetrics* metrics,
                                   CallGate gate, const BundlesService* bundles)
    : options_(std::move(options)),
      metrics_(metrics),
      gate_(gate),
      bundles_(bundles),
      workers_(options_.decisions.workers, options_.queue_capacity,
               options_.fair_workers) {}

DecisionsService::~DecisionsService() { Stop(); }

void DecisionsService::Stop() { workers_.Stop(); }

absl::Status DecisionsService::SetBackend(Backend* backend) {
  queued_ = backend;
  decider_ = std::make_unique<decision::Decider>(
      queued_, decision::DeciderOptionsFrom(options_.decisions));
  if (!options_.decisions.artifacts.empty()) {
    const std::string& path = options_.decisions.artifacts;
    auto bytes = util::ReadFile(path);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("decisions.artifacts: ", bytes.status().message()));
    }
    auto json =
        ParseJson(*bytes, absl::StrCat("decisions.artifacts (", path, ")"),
                  {.max_bytes = bytes->size(), .max_bytes_name = "its size"});
    if (!json.ok()) return json.status();
    auto loaded = decider_->artifacts().Load(*json);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("decisions.artifacts (", path,
                       ") refused: ", loaded.status().message()));
    }
  }
  ready_.store(decider_.get());
  return absl::OkStatus();
}

absl::StatusOr<decision::Decider*> DecisionsService::ServingDecider() const {
  decision::Decider* decider = ready_.load();
  if (decider == nullptr) return absl::UnavailableError("no model loaded");
  return decider;
}

absl::StatusOr<nlohmann::ordered_json> DecisionsService::ParseArtifactsJson(
    const std::string& bytes) const {
  return ParseJson(
      bytes, "artifacts_json",
      {.max_bytes = static_cast<size_t>(options_.limits.max_text_bytes) * 64,
       .max_bytes_name = "64 x limits.max_text_bytes"});
}

CallControl DecisionsService::DecisionControl(
    const grpc::CallbackServerContext& context, const UnaryCall& call,
    const CallAdmission& admission) const {
  CallControl control;
  control.deadline = Deadline(context);
  control.cancelled = call.cancelled();
  // Every engine job of the call runs for its tenant at its class, and its
  // running priors are the tenant's.
  control.tenant = admission.caller.tenant_name();
  control.priority = admission.priority;
  control.max_prompt_tokens = options_.limits.max_prompt_tokens;
  // Passed on, never interpreted: only a short alphanumeric key (what our
  // clients send) is kept, so nothing odd reaches another request's headers.
  const auto& metadata = context.client_metadata();
  if (const auto it = metadata.find(util::kAffinityMetadata);
      it != metadata.end() && it->second.size() <= 64 &&
      std::all_of(it->second.begin(), it->second.end(),
                  [](char c) { return absl::ascii_isalnum(c); })) {
    control.affinity.assign(it->second.data(), it->second.size());
  }
  return control;
}

TokenBudget DecisionsService::DecisionBudget() const {
  return TokenBudget{.limit = options_.limits.max_decide_tokens,
                     .limit_name = "limits.max_decide_tokens"};
}

absl::Time DecisionsService::Deadline(
    const grpc::CallbackServerContext& context) const {
  return CallDeadline(context, options_.default_deadline,
                      options_.max_deadline);
}

grpc::ServerUnaryReactor* DecisionsService::Decide(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const auto opened = OpenCall<v1::DecideRequest, v1::DecideResponse>(
      context, metrics_, Method::kDecide, gate_, ServingDecider(), raw_request,
      raw_response);
  if (!opened.ok()) return opened.call;
  UnaryCall* call = opened.call;
  const v1::DecideRequest& request = *opened.request;
  v1::DecideResponse* response = opened.response;
  auto parsed =
      ParseDecideRequest(request, options_.limits, queued_->capabilities(),
                         questions::QuestionSet::Reference());
  if (!parsed.ok()) {
    call->Complete(parsed.status());
    return call;
  }
  std::optional<nlohmann::ordered_json> scratch_artifacts;
  if (!request.artifacts_json().empty()) {
    auto json = ParseArtifactsJson(request.artifacts_json());
    if (!json.ok()) {
      call->Complete(json.status());
      return call;
    }
    scratch_artifacts = *std::move(json);
  }
  CallControl control = DecisionControl(*context, *call, opened.admission);
  absl::Status submitted = workers_.TrySubmit(
      WorkerOwner(opened.admission),
      [this, call, response, control, decider = opened.admitted,
       metrics = metrics_, parsed = *std::move(parsed),
       scratch_artifacts = std::move(scratch_artifacts)]() {
        TokenBudget budget = DecisionBudget();
        CallControl bounded = control;
        bounded.budget = &budget;
        std::unique_ptr<decision::Decider> scratch;
        decision::Decider* serving = decider;
        if (scratch_artifacts.has_value()) {
          scratch = std::make_unique<decision::Decider>(
              queued_, decision::ForFits(
                           decision::DeciderOptionsFrom(options_.decisions)));
          auto loaded = scratch->artifacts().Load(*scratch_artifacts);
          if (!loaded.ok()) {
            call->Complete(absl::InvalidArgumentError(absl::StrCat(
                "artifacts_json refused: ", loaded.status().message())));
            return;
          }
          serving = scratch.get();
        }
        decision::PriorTable carried = parsed.priors;
        decision::DecideOptions options = parsed.options;
        if (parsed.carry_priors) options.carried_priors = &carried;
        auto result = serving->Decide(parsed.states, parsed.questions,
                                      parsed.level, options, bounded);
        if (result.ok()) {
          FillDecideResponse(*result, serving->model_name(),
                             parsed.carry_priors ? &carried : nullptr,
                             response);
          for (const auto& row : *result) {
            for (const decision::Decision& d : row) {
              metrics->RecordDecisions(decision::LevelName(d.level),
                                       d.question_id, 1);
            }
          }
        }
        call->Complete(result.status());
      });
  call->Submitted(submitted);
  return call;
}

grpc::ServerUnaryReactor* DecisionsService::Fit(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const auto opened = OpenCall<v1::FitRequest, v1::FitResponse>(
      context, metrics_, Method::kFit, gate_, ServingDecider(), raw_request,
      raw_response);
  if (!opened.ok()) return opened.call;
  UnaryCall* call = opened.call;
  const v1::FitRequest& request = *opened.request;
  v1::FitResponse* response = opened.response;
  auto parsed = ParseFitRequest(request, options_.limits);
  if (!parsed.ok()) {
    call->Complete(parsed.status());
    return call;
  }
  CallControl control = DecisionControl(*context, *call, opened.admission);
  const bool dry_run = request.dry_run();
  absl::Status submitted = workers_.TrySubmit(
      WorkerOwner(opened.admission),
      [this, call, response, control, dry_run, serving = opened.admitted,
       parsed = *std::move(parsed)]() {
        TokenBudget budget = DecisionBudget();
        CallControl bounded = control;
        bounded.budget = &budget;
        // A dry run fits in a scratch decider and installs nothing.
        std::unique_ptr<decision::Decider> scratch;
        decision::Decider* fitter = serving;
        if (dry_run) {
          scratch = std::make_unique<decision::Decider>(
              queued_, decision::ForFits(
                           decision::DeciderOptionsFrom(options_.decisions)));
          fitter = scratch.get();
        }
        absl::StatusOr<nlohmann::ordered_json> artifact =
            parsed.level == decision::Level::kL1
                ? fitter->Calibrate(parsed.question, parsed.states,
                                    parsed.labels, bounded)
                : fitter->FitHead(parsed.question, parsed.states, parsed.labels,
                                  parsed.head, bounded);
        if (artifact.ok()) {
          response->set_question_key(parsed.question.key());
          response->set_level(decision::LevelName(parsed.level));
          response->set_artifact_json(artifact->dump());
          response->set_temperature(artifact->value("temperature", 0.0));
          if (parsed.level == decision::Level::kL2) {
            response->set_readout(artifact->value("method", std::string()));
            response->set_layer(artifact->value("layer_abs", 0));
            const auto& cv = (*artifact)["cv"];
            response->set_oof_nll(cv.value("oof_nll", 0.0));
            response->set_oof_acc(cv.value("oof_acc", 0.0));
            if (const auto routed = fitter->artifacts().Route(parsed.question);
                routed.has_value()) {
              response->set_head_version(routed->entry->version);
            }
          }
          if (dry_run) {
            const nlohmann::ordered_json fitted =
                fitter->artifacts().Export(/*include_observations=*/false);
            response->set_artifacts_json(fitted.dump());
          }
        }
        call->Complete(artifact.status());
      });
  call->Submitted(submitted);
  return call;
}

template <typename Request, typename Response, typename Answer>
grpc::ServerUnaryReactor* DecisionsService::Inline(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response, metrics::Method method, Answer answer) {
  const auto opened =
      OpenCall<Request, Response>(context, metrics_, method, gate_,
                                  ServingDecider(), raw_request, raw_response);
  if (opened.ok()) {
    opened.call->Complete(answer(opened.admission, *opened.admitted,
                                 *opened.request, opened.response));
  }
  return opened.call;
}

grpc::ServerUnaryReactor* DecisionsService::ExportArtifacts(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Inline<v1::ExportArtifactsRequest, v1::ExportArtifactsResponse>(
      context, raw_request, raw_response, Method::kExportArtifacts,
      [](const CallAdmission& admission, decision::Decider& decider,
         const v1::ExportArtifactsRequest& request,
         v1::ExportArtifactsResponse* response) {
        // The adaptation statistics as the caller's tenant sees them.
        response->set_artifacts_json(decider.artifacts()
                                         .Export(request.include_observations(),
                                                 admission.caller.tenant_name())
                                         .dump(1));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* DecisionsService::LoadArtifacts(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Inline<v1::LoadArtifactsRequest, v1::LoadArtifactsResponse>(
      context, raw_request, raw_response, Method::kLoadArtifacts,
      [this](const CallAdmission&, decision::Decider& decider,
             const v1::LoadArtifactsRequest& request,
             v1::LoadArtifactsResponse* response) -> absl::Status {
        ASSIGN_OR_RETURN(const auto json,
                         ParseArtifactsJson(request.artifacts_json()));
        ASSIGN_OR_RETURN(const int loaded, decider.artifacts().Load(json));
        response->set_loaded(loaded);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* DecisionsService::ResetPriors(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Inline<v1::ResetPriorsRequest, v1::ResetPriorsResponse>(
      context, raw_request, raw_response, Method::kResetPriors,
      [](const CallAdmission& admission, decision::Decider& decider,
         const v1::ResetPriorsRequest& request, v1::ResetPriorsResponse*) {
        // The caller's own tenant's running priors, never another's.
        const std::string& tenant = admission.caller.tenant_name();
        if (request.question_keys_size() == 0) {
          decider.ResetAllPriors(tenant);
        } else {
          for (const std::string& key : request.question_keys()) {
            decider.ResetPrior(key, tenant);
          }
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* DecisionsService::ListQuestions(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  // Reads the decider's tables and a copy of the served bundles: no model,
  // no file.
  return Inline<v1::ListQuestionsRequest, v1::ListQuestionsResponse>(
      context, raw_request, raw_response, Method::kListQuestions,
      [this](const CallAdmission&, decision::Decider& decider,
             const v1::ListQuestionsRequest& request,
             v1::ListQuestionsResponse* response) {
        return service::ListQuestions(
            request, questions::QuestionSet::Reference(), decider,
            bundles_ != nullptr ? bundles_->Served()
                                : std::map<std::string, ServedBundle>{},
            response);
      });
}

}  // namespace mesa_anyjev::service
