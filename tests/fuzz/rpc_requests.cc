// Bytes as any RPC request: parsed in the handler's way (request_parse.h),
// then converted and validated as the services do, against the fake model.
// The first byte picks the method (mod 10); the rest is the request body.
#include <grpcpp/support/byte_buffer.h>

#include "common/config/config.h"
#include "common/decision/decider.h"
#include "common/fake_backend.h"
#include "common/questions/question_set.h"
#include "google/protobuf/descriptor.h"
#include "grpc/reflection/v1/reflection.pb.h"
#include "mesa/anyjev/v1/bundles.pb.h"
#include "mesa/anyjev/v1/decisions.pb.h"
#include "mesa/anyjev/v1/inference.pb.h"
#include "server/service/decision_convert.h"
#include "server/service/question_listing.h"
#include "server/service/reflection_v1.h"
#include "server/service/request_convert.h"
#include "server/service/request_parse.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace v1 = ::mesa::anyjev::v1;
using namespace mesa_anyjev;

template <typename Request>
bool Parse(std::string_view body, Request* out) {
  grpc::Slice slice(body.data(), body.size());
  grpc::ByteBuffer buffer(&slice, 1);
  return service::ParseRequest(buffer, out).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static FakeBackend* fake = new FakeBackend();
  static const decision::Decider* decider = new decision::Decider(fake);
  const config::LimitsConfig limits;
  const std::string_view body = fuzz::AsText(data + 1, size - 1);
  switch (data[0] % 10) {
    case 0: {
      v1::DecideRequest request;
      if (Parse(body, &request)) {
        (void)service::ParseDecideRequest(request, limits, fake->capabilities(),
                                          questions::QuestionSet::Reference());
      }
      break;
    }
    case 1: {
      v1::FitRequest request;
      if (Parse(body, &request))
        (void)service::ParseFitRequest(request, limits);
      break;
    }
    case 2: {
      v1::LogprobsRequest request;
      if (Parse(body, &request)) {
        (void)service::CheckTopK(request.top_k(),
                                 fake->capabilities().vocab_size, limits);
        (void)service::ParseGroups(request.groups(), fake->tokenizer(), limits,
                                   fake->capabilities().vocab_size);
      }
      break;
    }
    case 3: {
      v1::HiddenStatesRequest request;
      if (Parse(body, &request)) {
        auto groups = service::ParseGroups(request.groups(), fake->tokenizer(),
                                           limits, 0);
        if (groups.ok()) {
          (void)service::ParseLayers(request.layers(), fake->capabilities(),
                                     limits, groups->n_prompts, 64 << 20);
        }
      }
      break;
    }
    case 4: {
      v1::TokenizeRequest request;
      if (Parse(body, &request)) {
        (void)service::ParseTokenizeRequest(request, fake->tokenizer(), limits);
      }
      break;
    }
    case 5: {
      v1::PutBundleRequest request;
      (void)Parse(body, &request);
      break;
    }
    case 6: {
      v1::LoadArtifactsRequest request;
      (void)Parse(body, &request);
      break;
    }
    case 7: {
      v1::PromoteBundleRequest request;
      (void)Parse(body, &request);
      break;
    }
    case 8: {
      v1::ListQuestionsRequest request;
      v1::ListQuestionsResponse response;
      if (Parse(body, &request)) {
        (void)service::ListQuestions(request,
                                     questions::QuestionSet::Reference(),
                                     *decider, {}, &response);
      }
      break;
    }
    default: {
      ::grpc::reflection::v1::ServerReflectionRequest request;
      if (Parse(body, &request)) {
        (void)service::AnswerReflection(
            request, {"mesa.anyjev.v1.Decisions"},
            *google::protobuf::DescriptorPool::generated_pool());
      }
      break;
    }
  }
  return 0;
}
