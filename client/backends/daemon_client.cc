#include "client/backends/daemon_client.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpc/support/log.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/backends/daemon_errors.h"
#include "client/backends/decision_proto.h"
#include "common/status/retry_after.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"
#include "common/util/daemon_target.h"
#include "common/util/secret.h"
#include "mesa/anyjev/v1/decisions.grpc.pb.h"
#include "mesa/anyjev/v1/inference.grpc.pb.h"
#include "proto/daemon_channel.h"

namespace mesa_anyjev::client {
namespace {

namespace v1 = ::mesa::anyjev::v1;

// grpc.health.v1 messages by hand: HealthCheckRequest{string service = 1},
// HealthCheckResponse{enum status = 1}. Debian ships no health.proto to
// generate from, and the wire format is two fields.
grpc::ByteBuffer EncodeHealthRequest(const std::string& service) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    if (!service.empty()) {
      out.WriteTag(/*field 1, length-delimited=*/(1 << 3) | 2);
      out.WriteVarint32(static_cast<uint32_t>(service.size()));
      out.WriteString(service);
    }
  }
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<std::string> DecodeHealthResponse(
    const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok())
    return absl::InternalError("health: bad reply");
  std::string bytes;
  for (const auto& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  uint32_t status = 0;  // UNKNOWN when the field is absent (proto3 default)
  while (uint32_t tag = in.ReadTag()) {
    if (tag == ((1 << 3) | 0)) {
      if (!in.ReadVarint32(&status)) break;
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in,
                                                                      tag)) {
      return absl::InternalError("health: malformed reply");
    }
  }
  static const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING",
                                 "SERVICE_UNKNOWN"};
  return std::string(status < 4 ? kNames[status] : "UNKNOWN");
}

// gRPC core logs transport errors to stderr by itself; the CLI says what
// went wrong in its own words (daemon_errors.h), so that text is noise
// unless GRPC_VERBOSITY asks for it.
void DropLog(gpr_log_func_args*) {}
void QuietGrpcLog() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function(DropLog);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Create(
    const config::ClientConfig& config) {
  QuietGrpcLog();
  ASSIGN_OR_RETURN(auto token, util::LoadSecret(config.token_env,
                                                config.token_file, "client"));
  ASSIGN_OR_RETURN(auto channel, OpenDaemonChannel(config));
  DaemonEndpoint endpoint{config.address, !config.tls_ca.empty(),
                          token.has_value(), config.timeout_s};
  return std::unique_ptr<DaemonClient>(new DaemonClient(
      std::move(channel), std::move(token), absl::Seconds(config.timeout_s),
      std::move(endpoint), config.affinity_bytes,
      config.priority == "default" ? "" : config.priority));
}

DaemonClient::DaemonClient(std::shared_ptr<grpc::Channel> channel,
                           std::optional<std::string> token,
                           absl::Duration timeout, DaemonEndpoint endpoint,
                           int32_t affinity_bytes, std::string priority)
    : channel_(std::move(channel)),
      token_(std::move(token)),
      timeout_(timeout),
      endpoint_(std::move(endpoint)),
      affinity_bytes_(affinity_bytes),
      priority_(std::move(priority)) {}

absl::Status DaemonClient::Failed(const grpc::Status& status,
                                  std::string_view what,
                                  const grpc::ClientContext* context) const {
  absl::Status out =
      ExplainDaemonError(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message(), what, endpoint_);
  if (context == nullptr) return out;
  const auto& trailers = context->GetServerTrailingMetadata();
  int64_t ms = 0;
  if (const auto it = trailers.find("grpc-retry-pushback-ms");
      it != trailers.end() &&
      absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()),
                       &ms)) {
    out = WithRetryAfter(std::move(out), absl::Milliseconds(ms));
  }
  return out;
}

void DaemonClient::Prepare(grpc::ClientContext& context,
                           std::string_view first_text,
                           std::optional<absl::Time> deadline) const {
  context.set_deadline(
      absl::ToChronoTime(deadline.value_or(absl::Now() + timeout_)));
  if (token_.has_value())
    context.AddMetadata("authorization", "Bearer " + *token_);
  if (!priority_.empty()) {
    context.AddMetadata(auth::kPriorityMetadata, priority_);
  }
  if (const std::string key = util::AffinityKey(first_text, affinity_bytes_);
      !key.empty()) {
    context.AddMetadata(util::kAffinityMetadata, key);
  }
}

absl::Status DaemonClient::Call(
    std::string_view first_text,
    const std::function<absl::Status(grpc::ClientContext&)>& attempt) const {
  auto once = [&](absl::Time deadline) -> absl::StatusOr<bool> {
    grpc::ClientContext context;
    Prepare(context, first_text, deadline);
    RETURN_IF_ERROR(attempt(context));
    return true;
  };
  if (retry_ == nullptr) return once(absl::Now() + timeout_).status();
  return retry_->Run<bool>(timeout_, once).status();
}

absl::StatusOr<std::string> DaemonClient::Health(const std::string& service) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  // Health is open, as probes expect: no token.
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  grpc::ByteBuffer reply;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 new grpc::ByteBuffer(EncodeHealthRequest(service)), &reply,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return Failed(status, "health");
  return DecodeHealthResponse(reply);
}

absl::StatusOr<DaemonInfo> DaemonClient::Info() {
  auto stub = v1::Inference::NewStub(channel_);
  v1::ModelInfo info;
  RETURN_IF_ERROR(Call("", [&](grpc::ClientContext& context) {
    const grpc::Status status =
        stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    return status.ok() ? absl::OkStatus()
                       : Failed(status, "GetModelInfo", &context);
  }));
  DaemonInfo out;
  out.identity = {info.name(), info.identity(), info.dtype(), info.device(),
                  info.attention()};
  out.capabilities.hidden_states = info.hidden_states();
  out.capabilities.early_stop = info.early_stop();
  out.capabilities.max_choice_k = info.max_choice_k();
  out.capabilities.n_layers = info.n_layers();
  out.capabilities.hidden_size = info.hidden_size();
  out.capabilities.vocab_size = info.vocab_size();
  const v1::Limits& limits = info.limits();
  out.limits.max_groups = limits.max_groups();
  out.limits.max_suffixes = limits.max_suffixes();
  out.limits.max_prompt_tokens = limits.max_prompt_tokens();
  out.limits.max_total_tokens = limits.max_total_tokens();
  out.limits.max_layers = limits.max_layers();
  out.limits.max_top_k = limits.max_top_k();
  out.limits.max_label_ids = limits.max_label_ids();
  out.limits.max_texts = limits.max_texts();
  out.limits.max_text_bytes = limits.max_text_bytes();
  // 0 from a daemon older than these fields: keep the defaults it had.
  if (limits.max_decide_states() > 0) {
    out.limits.max_decide_states = limits.max_decide_states();
    out.limits.max_decide_questions = limits.max_decide_questions();
    out.limits.max_fit_states = limits.max_fit_states();
    out.limits.max_decide_tokens = limits.max_decide_tokens();
  }
  if (info.has_device_info()) {
    const v1::DeviceInfo& d = info.device_info();
    out.device = DeviceInfo{d.name(), d.compute_capability(), d.shared_memory(),
                            d.driver_cuda(), d.runtime_cuda()};
  }
  if (info.system_memory_available_bytes() > 0) {
    out.system_memory_available = info.system_memory_available_bytes();
  }
  if (info.has_caller()) {
    const v1::CallerInfo& c = info.caller();
    DaemonCaller caller;
    caller.auth = c.auth();
    caller.tenant.name = c.tenant();
    caller.tenant.role =
        auth::ParseRole(c.role()).value_or(auth::Role::kDecide);
    caller.tenant.weight = c.weight();
    caller.tenant.priority = PriorityNamed(c.default_priority());
    caller.tenant.max_priority =
        PriorityNamed(c.max_priority()).value_or(Priority::kInteractive);
    caller.tenant.max_queued_calls = c.max_queued_calls();
    caller.tenant.max_queued_tokens = c.max_queued_tokens();
    caller.priority =
        PriorityNamed(c.priority()).value_or(Priority::kInteractive);
    out.caller = std::move(caller);
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<TokenId>>> DaemonClient::Tokenize(
    const std::vector<std::string>& texts) {
  auto stub = v1::Inference::NewStub(channel_);
  v1::TokenizeRequest request;
  for (const std::string& text : texts) request.add_texts(text);
  v1::TokenizeResponse response;
  RETURN_IF_ERROR(Call(
      texts.empty() ? "" : texts.front(), [&](grpc::ClientContext& context) {
        const grpc::Status status =
            stub->Tokenize(&context, request, &response);
        return status.ok() ? absl::OkStatus()
                           : Failed(status, "Tokenize", &context);
      }));
  if (response.items_size() != static_cast<int>(texts.size())) {
    return absl::InternalError("Tokenize: one item per text expected");
  }
  std::vector<std::vector<TokenId>> out;
  for (const v1::TokenIds& item : response.items()) {
    out.emplace_back(item.ids().begin(), item.ids().end());
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>>
DaemonClient::Decide(const std::vector<std::string>& states,
                     const std::vector<decision::Question>& questions,
                     decision::Level level,
                     std::optional<decision::Level> require,
                     const nlohmann::ordered_json* scratch_artifacts,
                     decision::PriorTable* carried) {
  auto stub = v1::Decisions::NewStub(channel_);
  v1::DecideRequest request;
  for (const std::string& state : states) {
    request.add_states()->set_text(state);
  }
  for (const decision::Question& question : questions) {
    ToProto(question, request.add_questions());
  }
  request.set_level(decision::LevelName(level));
  // Records name the level of this exact key, so a reworded head never
  // serves them (docs/reference.md, Exact-key levels).
  request.mutable_options()->set_exact_heads(true);
  if (require.has_value()) request.set_require(decision::LevelName(*require));
  if (scratch_artifacts != nullptr) {
    request.set_artifacts_json(scratch_artifacts->dump());
  }
  if (carried != nullptr) {
    request.set_carry_priors(true);
    ToProto(*carried, questions, &request);
  }
  v1::DecideResponse response;
  RETURN_IF_ERROR(Call(
      states.empty() ? "" : states.front(), [&](grpc::ClientContext& context) {
        const grpc::Status status = stub->Decide(&context, request, &response);
        return status.ok() ? absl::OkStatus()
                           : Failed(status, "Decide", &context);
      }));
  if (carried != nullptr) RETURN_IF_ERROR(FromProto(response, carried));
  return FromProto(response, states.size(), questions);
}

absl::StatusOr<nlohmann::ordered_json> DaemonClient::FitDryRun(
    const decision::Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, decision::Level level) {
  auto stub = v1::Decisions::NewStub(channel_);
  v1::FitRequest request;
  ToProto(question, request.mutable_question());
  for (const std::string& state : states) {
    request.add_states()->set_text(state);
  }
  for (const int label : labels) request.add_labels(label);
  request.set_level(decision::LevelName(level));
  request.set_dry_run(true);
  v1::FitResponse response;
  RETURN_IF_ERROR(Call(
      states.empty() ? "" : states.front(), [&](grpc::ClientContext& context) {
        const grpc::Status status = stub->Fit(&context, request, &response);
        return status.ok() ? absl::OkStatus() : Failed(status, "Fit", &context);
      }));
  auto parsed = text::ParseStrictOrderedJson(response.artifacts_json(), {});
  if (!parsed.ok()) {
    return absl::InternalError(
        absl::StrCat("Fit: artifacts_json (a daemon without dry_run?): ",
                     parsed.status().message()));
  }
  return parsed;
}

absl::Status DaemonClient::ResetPriors(const std::vector<std::string>& keys) {
  auto stub = v1::Decisions::NewStub(channel_);
  v1::ResetPriorsRequest request;
  for (const std::string& key : keys) request.add_question_keys(key);
  v1::ResetPriorsResponse response;
  return Call("", [&](grpc::ClientContext& context) {
    const grpc::Status status = stub->ResetPriors(&context, request, &response);
    return status.ok() ? absl::OkStatus()
                       : Failed(status, "ResetPriors", &context);
  });
}

}  // namespace mesa_anyjev::client
