// grpc.reflection.v1 answers over the generated pool (server/service/
// reflection_v1); the e2e test asks the running daemon the same over gRPC.
#include "server/service/reflection_v1.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "google/protobuf/descriptor.pb.h"
#include "mesa/anyjev/v1/decisions.pb.h"

namespace mesa_anyjev::service {
namespace {

namespace rv1 = ::grpc::reflection::v1;

const std::vector<std::string> kServices = {
    "mesa.anyjev.v1.Decisions", "grpc.reflection.v1.ServerReflection"};

rv1::ServerReflectionResponse Ask(const rv1::ServerReflectionRequest& request) {
  // Decisions' descriptors are in the pool once its code is linked.
  (void)::mesa::anyjev::v1::DecideRequest::descriptor();
  return AnswerReflection(request, kServices,
                          *google::protobuf::DescriptorPool::generated_pool());
}

std::set<std::string> FileNames(const rv1::ServerReflectionResponse& response) {
  std::set<std::string> names;
  for (const std::string& bytes :
       response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    REQUIRE(file.ParseFromString(bytes));
    names.insert(file.name());
  }
  return names;
}

TEST_CASE("reflection v1 lists the services it was given", "[reflection]") {
  rv1::ServerReflectionRequest request;
  request.set_host("localhost");
  request.set_list_services("*");
  const auto response = Ask(request);
  CHECK(response.valid_host() == "localhost");
  CHECK(response.original_request().list_services() == "*");
  REQUIRE(response.list_services_response().service_size() == 2);
  CHECK(response.list_services_response().service(0).name() ==
        "mesa.anyjev.v1.Decisions");
}

TEST_CASE("reflection v1 answers a symbol or a file with its imports",
          "[reflection]") {
  rv1::ServerReflectionRequest request;
  request.set_file_containing_symbol("mesa.anyjev.v1.Decisions");
  CHECK(FileNames(Ask(request)) ==
        std::set<std::string>{"mesa/anyjev/v1/decisions.proto"});
  request.set_file_containing_symbol("mesa.anyjev.v1.Decisions.ListQuestions");
  CHECK(FileNames(Ask(request)).size() == 1);
  request.set_file_by_filename("mesa/anyjev/v1/inference.proto");
  CHECK(FileNames(Ask(request)) ==
        std::set<std::string>{"mesa/anyjev/v1/inference.proto",
                              "mesa/anyjev/v1/tensor.proto"});
  request.set_all_extension_numbers_of_type("mesa.anyjev.v1.State");
  const auto numbers = Ask(request);
  CHECK(numbers.all_extension_numbers_response().base_type_name() ==
        "mesa.anyjev.v1.State");
  CHECK(numbers.all_extension_numbers_response().extension_number_size() == 0);
}

TEST_CASE("reflection v1 errors are ErrorResponses with gRPC codes",
          "[reflection]") {
  rv1::ServerReflectionRequest request;
  auto code = [&] { return Ask(request).error_response().error_code(); };
  request.set_file_containing_symbol("mesa.anyjev.v1.Nothing");
  CHECK(code() == grpc::StatusCode::NOT_FOUND);
  CHECK(Ask(request).error_response().error_message() ==
        "symbol 'mesa.anyjev.v1.Nothing' not found");
  request.set_file_by_filename("no/such.proto");
  CHECK(code() == grpc::StatusCode::NOT_FOUND);
  request.mutable_file_containing_extension()->set_containing_type(
      "mesa.anyjev.v1.State");
  request.mutable_file_containing_extension()->set_extension_number(100);
  CHECK(code() == grpc::StatusCode::NOT_FOUND);
  request.set_all_extension_numbers_of_type("no.Such");
  CHECK(code() == grpc::StatusCode::NOT_FOUND);
  request.set_file_containing_symbol(std::string(1025, 'a'));
  CHECK(code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(Ask(request).error_response().error_message() ==
        "file_containing_symbol: 1025 bytes exceed 1024");
  request.clear_message_request();
  CHECK(code() == grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace mesa_anyjev::service
