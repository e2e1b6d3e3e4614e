// grpc.reflection.v1.ServerReflection (proto/grpc/reflection/v1): the
// services the daemon serves and the descriptors of their proto files, from
// the generated descriptor pool. Debian's gRPC 1.51 plugin serves only
// grpc.reflection.v1alpha (the daemon keeps it); clients such as grpcurl
// 1.9 ask v1 first. Open without auth, like health: schema only.
//
// The stream answers one request at a time (one read, then one write), so
// a client holds at most one request and one response of memory; a request
// over kMaxReflectionRequestBytes, a name over kMaxReflectionNameBytes or
// bytes that do not parse get an ErrorResponse and the stream goes on.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace mesa_anyjev::service {

inline constexpr size_t kMaxReflectionRequestBytes = 64 << 10;
inline constexpr size_t kMaxReflectionNameBytes = 1024;

// The response to one request: list_services from `services`, files with
// every file they import (each once), and errors as ErrorResponse with a
// gRPC code (NOT_FOUND for an unknown name, INVALID_ARGUMENT for a name over
// the limit, UNIMPLEMENTED for an empty request).
::grpc::reflection::v1::ServerReflectionResponse AnswerReflection(
    const ::grpc::reflection::v1::ServerReflectionRequest& request,
    const std::vector<std::string>& services,
    const google::protobuf::DescriptorPool& pool);

using RawServiceReflectionV1 = ::grpc::reflection::v1::ServerReflection::
    WithRawCallbackMethod_ServerReflectionInfo<
        ::grpc::reflection::v1::ServerReflection::Service>;

class ReflectionV1Service final : public RawServiceReflectionV1 {
 public:
  // `services`: the full names list_services answers, in this order.
  explicit ReflectionV1Service(std::vector<std::string> services);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace mesa_anyjev::service
