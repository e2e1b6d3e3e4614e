#include "server/service/remote_hidden_states.h"

#include <grpcpp/grpcpp.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/auth/tenant.h"
#include "common/status/status_macros.h"
#include "common/util/daemon_target.h"
#include "common/util/secret.h"
#include "mesa/anyjev/v1/inference.grpc.pb.h"
#include "proto/daemon_channel.h"

namespace mesa_anyjev::service {
namespace {

namespace v1 = ::mesa::anyjev::v1;

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("local daemon ", what, ": ", status.error_message()));
}

void Prepare(grpc::ClientContext& context, absl::Time deadline,
             const std::optional<std::string>& token,
             const std::string& affinity = "") {
  context.set_deadline(absl::ToChronoTime(deadline));
  if (token.has_value()) {
    context.AddMetadata("authorization", "Bearer " + *token);
  }
  if (!affinity.empty()) context.AddMetadata(util::kAffinityMetadata, affinity);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteHiddenStates>> RemoteHiddenStates::Create(
    const config::ClientConfig& client, const text::Tokenizer& prompts) {
  ASSIGN_OR_RETURN(auto token, util::LoadSecret(client.token_env,
                                                client.token_file, "client"));
  ASSIGN_OR_RETURN(auto channel, OpenDaemonChannel(client));
  std::unique_ptr<RemoteHiddenStates> out(new RemoteHiddenStates(
      channel, std::move(token), prompts, client.affinity_bytes));

  auto stub = v1::Inference::NewStub(channel);
  const absl::Time deadline = absl::Now() + absl::Seconds(client.timeout_s);
  {
    grpc::ClientContext context;
    Prepare(context, deadline, out->token_);
    context.set_wait_for_ready(true);  // the local daemon may still load
    v1::ModelInfo info;
    grpc::Status status =
        stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (!status.ok()) {
      return FromGrpc(status, absl::StrCat("at ", client.address));
    }
    out->identity_ = {info.name(), info.identity(), info.dtype(), info.device(),
                      info.attention()};
    Capabilities& caps = out->capabilities_;
    caps.hidden_states = info.hidden_states();
    caps.early_stop = info.early_stop();
    caps.max_choice_k = info.max_choice_k();
    caps.n_layers = info.n_layers();
    caps.hidden_size = info.hidden_size();
    caps.vocab_size = info.vocab_size();
  }
  // The reference's composite refusal: every label must have the same id on
  // both sides, or the two halves read different answers.
  const std::vector<std::string> labels = CheckedLabels();
  grpc::ClientContext context;
  Prepare(context, deadline, out->token_);
  v1::TokenizeRequest request;
  for (const std::string& label : labels) request.add_texts(label);
  v1::TokenizeResponse response;
  grpc::Status status = stub->Tokenize(&context, request, &response);
  if (!status.ok()) return FromGrpc(status, "Tokenize");
  std::vector<std::vector<TokenId>> remote;
  for (const v1::TokenIds& item : response.items()) {
    remote.emplace_back(item.ids().begin(), item.ids().end());
  }
  RETURN_IF_ERROR(CheckLabelAgreement(prompts, remote));
  return out;
}

absl::StatusOr<HiddenStatesResult> RemoteHiddenStates::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  v1::HiddenStatesRequest request;
  int32_t n_prompts = 0;
  for (const PromptGroup& group : groups) {
    v1::PromptGroup* out = request.add_groups();
    ASSIGN_OR_RETURN(std::string prefix, prompts_.Decode(group.prefix));
    out->mutable_prefix()->set_text(std::move(prefix));
    for (const auto& suffix : group.suffixes) {
      ASSIGN_OR_RETURN(std::string text, prompts_.Decode(suffix));
      out->add_suffixes()->set_text(std::move(text));
      ++n_prompts;
    }
  }
  for (int32_t layer : layers) request.add_layers(layer);
  auto stub = v1::Inference::NewStub(channel_);
  grpc::ClientContext context;
  Prepare(context,
          control.deadline == absl::InfiniteFuture()
              ? absl::Now() + absl::Hours(1)
              : control.deadline,
          token_,
          // The caller's key keeps its calls on one daemon; without one
          // (a merged call), the first prompt's beginning stands in.
          !control.affinity.empty()
              ? control.affinity
              : util::AffinityKey(request.groups_size() > 0
                                      ? request.groups(0).prefix().text()
                                      : "",
                                  affinity_bytes_));
  // The caller's class goes on with its work; the daemon there caps it by
  // the router's own tenant.
  context.AddMetadata(auth::kPriorityMetadata, PriorityName(control.priority));
  v1::HiddenStatesResponse response;
  grpc::Status status = stub->HiddenStates(&context, request, &response);
  if (!status.ok()) return FromGrpc(status, "HiddenStates");
  HiddenStatesResult out;
  out.layers.assign(response.layers().begin(), response.layers().end());
  out.n_prompts = n_prompts;
  out.hidden_size = capabilities_.hidden_size;
  const v1::Tensor& hidden = response.hidden();
  const size_t expected = static_cast<size_t>(n_prompts) * out.layers.size() *
                          static_cast<size_t>(out.hidden_size);
  if (hidden.dtype() != "float32" ||
      hidden.data().size() != expected * sizeof(float)) {
    return absl::InternalError(
        absl::StrCat("local daemon HiddenStates: ", hidden.dtype(),
                     " tensor of ", hidden.data().size(),
                     " bytes, expected float32 of ", expected * sizeof(float)));
  }
  out.values.resize(expected);
  // The wire is little-endian float32, as this host (x86-64, aarch64).
  std::memcpy(out.values.data(), hidden.data().data(), hidden.data().size());
  return out;
}

}  // namespace mesa_anyjev::service
