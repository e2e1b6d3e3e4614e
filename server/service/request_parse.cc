// Request parsing in the handler (see request_parse.h).
#include "server/service/request_parse.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/wire_format_lite.h"

namespace mesa_anyjev::service {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// protobuf's own recursion limit; deeper bytes do not parse anyway.
constexpr int kMaxDepth = 100;

std::string Walk(const Descriptor* type, std::string_view bytes, int depth,
                 const std::string& prefix) {
  if (depth > kMaxDepth) return "";
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  std::map<int, int> seen;  // field number -> occurrences so far
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return "";
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field = type->FindFieldByNumber(number);
    if (WireFormatLite::GetTagWireType(tag) !=
        WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return "";
      continue;
    }
    std::string payload;
    uint32_t length = 0;
    if (!in.ReadVarint32(&length) ||
        !in.ReadString(&payload, static_cast<int>(length))) {
      return "";
    }
    if (field == nullptr) continue;
    const int index = seen[number]++;
    const std::string path =
        absl::StrCat(prefix, prefix.empty() ? "" : ".", field->name(),
                     field->is_repeated() ? absl::StrCat("[", index, "]") : "");
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (const int64_t at = text::FirstInvalidUtf8(payload); at >= 0) {
        return absl::StrCat(path, ": invalid UTF-8 at byte offset ", at);
      }
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      std::string found = Walk(field->message_type(), payload, depth + 1, path);
      if (!found.empty()) return found;
    }
  }
}

}  // namespace

std::string FindInvalidUtf8Field(const Descriptor* type,
                                 std::string_view bytes) {
  return Walk(type, bytes, 0, "");
}

absl::Status ParseRequest(const grpc::ByteBuffer& raw,
                          google::protobuf::Message* out) {
  // One copy of the request: it is parsed, and walked again only when it
  // does not parse.
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (raw.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  {
    // protobuf logs every invalid UTF-8 string it meets; the caller gets it
    // in the status instead, and no client may fill the daemon's log.
    google::protobuf::LogSilencer quiet;
    if (out->ParseFromString(bytes)) return absl::OkStatus();
  }
  const std::string field = FindInvalidUtf8Field(out->GetDescriptor(), bytes);
  if (!field.empty()) return absl::InvalidArgumentError(field);
  return absl::InvalidArgumentError(absl::StrCat(
      "request: not a valid ", out->GetDescriptor()->full_name(), " message"));
}

absl::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* out) {
  bool own = false;
  const grpc::Status status =
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(
          message, out, &own);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("the response does not serialise: ",
                                          status.error_message()));
}

}  // namespace mesa_anyjev::service
