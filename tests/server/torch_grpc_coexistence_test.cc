// libtorch (from the PyPI torch wheel) and Debian's gRPC + protobuf in one
// process: a real InferenceService on 127.0.0.1 whose Logprobs answers come
// from a libtorch log_softmax, called over gRPC, checked against the same
// numbers computed in plain C++, and the /metrics endpoint scraped in the
// same process (civetweb's small worker stacks fail beside libtorch's static
// TLS; httplib's threads do not).
#include <ATen/ATen.h>
#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <torch/version.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/text/fake_tokenizer.h"
#include "mesa/anyjev/v1/inference.grpc.pb.h"
#include "server/engine/backend_forward_model.h"
#include "server/engine/call_loop.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/service/inference_service.h"
#include "server/service/serving_state.h"
#include "server/service/tenant_auth.h"

namespace mesa_anyjev {
namespace {

namespace v1 = ::mesa::anyjev::v1;

// logits[v] = sin(0.37 * v * n) for a prompt of n tokens.
double Logit(int64_t v, int64_t n) {
  return std::sin(0.37 * double(v) * double(n));
}

// A backend whose numbers come from libtorch.
class TorchBackend final : public Backend {
 public:
  TorchBackend() {
    capabilities_.vocab_size = tokenizer_.vocab_size();
    identity_ = {"torch-probe", "none", "float32", "cpu", "matmul"};
  }
  const ModelIdentity& identity() const override { return identity_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  const text::Tokenizer& tokenizer() const override { return tokenizer_; }
  const text::ChatTemplate& chat_template() const override {
    return chat_template_;
  }

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t,
      const CallControl&) override {
    std::vector<std::vector<PromptLogprobs>> out;
    for (const PromptGroup& group : groups) {
      auto& prompts = out.emplace_back();
      for (const auto& suffix : group.suffixes) {
        const int64_t n =
            static_cast<int64_t>(group.prefix.size() + suffix.size());
        at::Tensor logits =
            at::sin(at::arange(capabilities_.vocab_size, at::kDouble) *
                    (0.37 * double(n)));
        at::Tensor logprobs = at::log_softmax(logits, /*dim=*/0);
        PromptLogprobs prompt;
        prompt.n_tokens = static_cast<int32_t>(n);
        for (TokenId id : group.label_ids) {
          prompt.label_logprobs.push_back(logprobs[id].item<double>());
        }
        prompts.push_back(std::move(prompt));
      }
    }
    return out;
  }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>&, const std::vector<int32_t>&,
      const CallControl&) override {
    return absl::UnimplementedError("not in this probe");
  }

 private:
  text::FakeTokenizer tokenizer_;
  text::ChatTemplate chat_template_ = text::ChatTemplate::None();
  ModelIdentity identity_;
  Capabilities capabilities_;
};

int failures = 0;
int passes = 0;
void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  ok ? ++passes : ++failures;
}

int Run() {
  std::printf("libtorch %s, protobuf headers %d, gRPC %s\n", TORCH_VERSION,
              GOOGLE_PROTOBUF_VERSION, grpc::Version().c_str());
  // A tensor op on its own: 64x64 matmul against a hand loop.
  at::Tensor a = at::rand({64, 64}, at::kDouble);
  at::Tensor b = at::rand({64, 64}, at::kDouble);
  at::Tensor c = at::matmul(a, b);
  double expected = 0;
  for (int k = 0; k < 64; ++k)
    expected += a[3][k].item<double>() * b[k][5].item<double>();
  Check(std::abs(c[3][5].item<double>() - expected) < 1e-9, "libtorch matmul");

  metrics::ServerMetrics server_metrics("test", "test");
  engine::EngineOptions options;
  options.limits.capacity = 8;
  engine::Engine engine(options, &server_metrics);
  engine.Start();
  service::TenantAuth auth(nullptr);
  service::ServingStateFlag state;
  state.set(service::ServingState::kServing);
  TorchBackend backend;
  engine::BackendForwardModel forward(&backend);
  engine.SetLoop(
      std::make_unique<engine::CallLoop>(&forward, 0, &server_metrics));
  service::InferenceService inference({}, &engine, &server_metrics,
                                      service::CallGate{&auth, &state});
  inference.SetBackend(&backend);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&inference);
  auto server = builder.BuildAndStart();
  Check(server != nullptr && port > 0,
        absl::StrCat("gRPC server on port ", port));
  metrics::MetricsEndpoint endpoint(server_metrics.registry());
  auto metrics_port = endpoint.Start("127.0.0.1:0");
  Check(metrics_port.ok(), "metrics endpoint bound");

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Inference::NewStub(channel);
  v1::LogprobsRequest request;
  v1::PromptGroup* group = request.add_groups();
  group->mutable_prefix()->set_text("State:\nhello\n\nQuestion: which?\n");
  group->add_suffixes()->set_text("A. one\nB. two");
  group->add_suffixes()->set_text("A. two\nB. one");
  for (TokenId id : {0, 7, 300}) group->add_label_ids(id);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1::LogprobsResponse response;
  grpc::Status status = stub->Logprobs(&context, request, &response);
  Check(status.ok(),
        absl::StrCat("Logprobs over gRPC: ", status.error_message()));
  if (status.ok()) {
    double worst = 0;
    for (const auto& prompt : response.groups(0).prompts()) {
      const int64_t n = prompt.n_tokens();
      double max_logit = -1e300, sum = 0;
      for (int64_t v = 0; v < backend.capabilities().vocab_size; ++v) {
        max_logit = std::max(max_logit, Logit(v, n));
      }
      for (int64_t v = 0; v < backend.capabilities().vocab_size; ++v) {
        sum += std::exp(Logit(v, n) - max_logit);
      }
      const double lse = max_logit + std::log(sum);
      const int64_t ids[] = {0, 7, 300};
      for (int i = 0; i < 3; ++i) {
        worst = std::max(worst, std::abs(prompt.label_logprobs(i) -
                                         (Logit(ids[i], n) - lse)));
      }
    }
    Check(response.groups(0).prompts_size() == 2 && worst < 1e-12,
          absl::StrCat("libtorch log_softmax served over gRPC, max error ",
                       worst));
  }
  if (metrics_port.ok()) {
    httplib::Client http("127.0.0.1", *metrics_port);
    auto scraped = http.Get("/metrics");
    Check(scraped && scraped->status == 200 &&
              scraped->body.find("mesa_anyjev_requests_total{code=\"OK\","
                                 "method=\"Logprobs\"} 1") != std::string::npos,
          "/metrics scraped in the libtorch process");
  }
  server->Shutdown();
  engine.Stop();
  endpoint.Stop();
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mesa_anyjev

int main() { return mesa_anyjev::Run(); }
