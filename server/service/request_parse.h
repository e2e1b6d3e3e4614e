// Request bytes to messages inside our handlers. gRPC's own parse refuses a
// proto3 string field that is not UTF-8 before any handler runs: the caller
// gets UNIMPLEMENTED with no message and the call is in no metric. Our
// services take raw bytes instead and parse here, so a bad request gets
// INVALID_ARGUMENT naming the field and is counted like any other.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace mesa_anyjev::service {

// Parses `raw` into `out`; INVALID_ARGUMENT "<field path>: invalid UTF-8 at
// byte offset N" (the field first, as in every other refusal, so a client
// can tell which state failed), or "request: not a valid <type> message".
absl::Status ParseRequest(const grpc::ByteBuffer& raw,
                          google::protobuf::Message* out);

// The path of the first string field in `bytes` (wire format of a message
// of type `type`) that is not valid UTF-8, as "questions[0].kind: invalid
// UTF-8 at byte offset 3"; empty when there is none or the bytes are not
// wire format. Bounded by the nesting the bytes themselves carry.
std::string FindInvalidUtf8Field(const google::protobuf::Descriptor* type,
                                 std::string_view bytes);

// `message` as response bytes; INTERNAL when it does not serialise.
absl::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* out);

}  // namespace mesa_anyjev::service
