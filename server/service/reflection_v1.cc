// grpc.reflection.v1 (see reflection_v1.h).
#include "server/service/reflection_v1.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"
#include "google/protobuf/descriptor.pb.h"
#include "server/service/request_parse.h"

namespace mesa_anyjev::service {
namespace {

namespace rv1 = ::grpc::reflection::v1;
using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

void SetError(absl::StatusCode code, const std::string& message,
              rv1::ServerReflectionResponse* out) {
  rv1::ErrorResponse* error = out->mutable_error_response();
  error->set_error_code(static_cast<int>(code));
  error->set_error_message(message);
}

// `file` and every file it imports, depth first, each once.
void AddFile(const FileDescriptor* file, std::set<std::string>* seen,
             rv1::FileDescriptorResponse* out) {
  if (!seen->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFile(file->dependency(i), seen, out);
  }
}

void AnswerFile(const FileDescriptor* file, const std::string& what,
                rv1::ServerReflectionResponse* out) {
  if (file == nullptr) {
    SetError(absl::StatusCode::kNotFound, absl::StrCat(what, " not found"),
             out);
    return;
  }
  std::set<std::string> seen;
  AddFile(file, &seen, out->mutable_file_descriptor_response());
}

// Whether a name from the request is within the limit; if not, `out` says so.
bool CheckName(const std::string& field, const std::string& name,
               rv1::ServerReflectionResponse* out) {
  if (name.size() <= kMaxReflectionNameBytes) return true;
  SetError(absl::StatusCode::kInvalidArgument,
           absl::StrCat(field, ": ", name.size(), " bytes exceed ",
                        kMaxReflectionNameBytes),
           out);
  return false;
}

// The file `find` gives for the name in `field` (`what` in a NOT_FOUND).
template <typename Find>
void AnswerByName(const char* field, const char* what, const std::string& name,
                  Find find, rv1::ServerReflectionResponse* out) {
  if (!CheckName(field, name, out)) return;
  AnswerFile(find(name), absl::StrCat(what, " '", text::Printable(name), "'"),
             out);
}

}  // namespace

rv1::ServerReflectionResponse AnswerReflection(
    const rv1::ServerReflectionRequest& request,
    const std::vector<std::string>& services, const DescriptorPool& pool) {
  rv1::ServerReflectionResponse out;
  out.set_valid_host(request.host());
  *out.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case rv1::ServerReflectionRequest::kListServices:
      for (const std::string& name : services) {
        out.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case rv1::ServerReflectionRequest::kFileByFilename:
      AnswerByName(
          "file_by_filename", "file", request.file_by_filename(),
          [&](const std::string& name) { return pool.FindFileByName(name); },
          &out);
      break;
    case rv1::ServerReflectionRequest::kFileContainingSymbol:
      AnswerByName(
          "file_containing_symbol", "symbol", request.file_containing_symbol(),
          [&](const std::string& name) {
            return pool.FindFileContainingSymbol(name);
          },
          &out);
      break;
    case rv1::ServerReflectionRequest::kFileContainingExtension: {
      const rv1::ExtensionRequest& asked = request.file_containing_extension();
      if (!CheckName("file_containing_extension.containing_type",
                     asked.containing_type(), &out)) {
        break;
      }
      const Descriptor* type =
          pool.FindMessageTypeByName(asked.containing_type());
      const FieldDescriptor* extension =
          type == nullptr
              ? nullptr
              : pool.FindExtensionByNumber(type, asked.extension_number());
      AnswerFile(extension == nullptr ? nullptr : extension->file(),
                 absl::StrCat("extension ", asked.extension_number(), " of '",
                              text::Printable(asked.containing_type()), "'"),
                 &out);
      break;
    }
    case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const std::string& name = request.all_extension_numbers_of_type();
      if (!CheckName("all_extension_numbers_of_type", name, &out)) break;
      const Descriptor* type = pool.FindMessageTypeByName(name);
      if (type == nullptr) {
        SetError(absl::StatusCode::kNotFound,
                 absl::StrCat("type '", text::Printable(name), "' not found"),
                 &out);
        break;
      }
      std::vector<const FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      std::vector<int> numbers;
      for (const FieldDescriptor* e : extensions)
        numbers.push_back(e->number());
      std::sort(numbers.begin(), numbers.end());
      rv1::ExtensionNumberResponse* answer =
          out.mutable_all_extension_numbers_response();
      answer->set_base_type_name(type->full_name());
      answer->mutable_extension_number()->Add(numbers.begin(), numbers.end());
      break;
    }
    case rv1::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      SetError(absl::StatusCode::kUnimplemented,
               "the request asks nothing (set one of file_by_filename, "
               "file_containing_symbol, file_containing_extension, "
               "all_extension_numbers_of_type, list_services)",
               &out);
      break;
  }
  return out;
}

namespace {

// One stream: read a request, write its answer, read the next. gRPC runs
// the callbacks one at a time for a reactor, so the buffers need no lock.
class ReflectionStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit ReflectionStream(const std::vector<std::string>* services)
      : services_(services) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or the call ended
      Finish(grpc::Status::OK);
      return;
    }
    rv1::ServerReflectionResponse answer = Answer();
    request_.Clear();
    response_.Clear();  // the serializer wants an empty buffer
    if (absl::Status status = SerializeResponse(answer, &response_);
        !status.ok()) {
      Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                          std::string(status.message())));
      return;
    }
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream ended"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  rv1::ServerReflectionResponse Answer() const {
    rv1::ServerReflectionResponse out;
    if (request_.Length() > kMaxReflectionRequestBytes) {
      SetError(absl::StatusCode::kInvalidArgument,
               absl::StrCat("request: ", request_.Length(), " bytes exceed ",
                            kMaxReflectionRequestBytes),
               &out);
      return out;
    }
    rv1::ServerReflectionRequest request;
    if (absl::Status parsed = ParseRequest(request_, &request); !parsed.ok()) {
      SetError(parsed.code(), std::string(parsed.message()), &out);
      return out;
    }
    return AnswerReflection(request, *services_,
                            *DescriptorPool::generated_pool());
  }

  const std::vector<std::string>* const services_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace

ReflectionV1Service::ReflectionV1Service(std::vector<std::string> services)
    : services_(std::move(services)) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionStream(&services_);
}

}  // namespace mesa_anyjev::service
