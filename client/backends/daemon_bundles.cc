// DaemonClient's Bundles calls (see daemon_client.h).
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/backends/daemon_client.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"
#include "mesa/anyjev/v1/bundles.grpc.pb.h"

namespace mesa_anyjev::client {
namespace {

namespace v1 = ::mesa::anyjev::v1;

template <typename Response>
bundles::PointerMove Moved(const Response& response) {
  bundles::PointerMove moved;
  moved.version = response.version();
  if (response.has_previous()) moved.previous = response.previous();
  return moved;
}

// The lock's questions mapping when `lock_sha` is the CLI's own lock, so the
// daemon records the keys it holds; "" for any other lock.
std::string QuestionsJsonFor(const std::string& lock_sha) {
  static const auto* const own = new std::pair<std::string, std::string>(
      questions::LockSha(questions::QuestionSet::Reference()),
      questions::LockQuestions(questions::QuestionSet::Reference()).dump());
  return lock_sha == own->first ? own->second : std::string();
}

}  // namespace

absl::StatusOr<RemoteBundles> DaemonClient::ListBundles(
    const std::string& lock_sha) {
  auto stub = v1::Bundles::NewStub(channel_);
  v1::ListBundlesRequest request;
  request.set_lock_sha(lock_sha);
  request.set_questions_json(QuestionsJsonFor(lock_sha));
  v1::ListBundlesResponse response;
  const absl::Status listed = Call("", [&](grpc::ClientContext& context) {
    const grpc::Status status = stub->List(&context, request, &response);
    return status.ok() ? absl::OkStatus() : Failed(status, "", &context);
  });
  if (!listed.ok()) return listed;
  RemoteBundles out;
  out.model = response.model();
  out.dir = response.dir();
  out.served_lock_sha = response.served_lock_sha();
  out.write_error = response.write_error();
  for (const v1::BundleVersionInfo& info : response.versions()) {
    bundles::VersionEntry entry{info.version(), info.path(),
                                absl::UnknownError(info.error())};
    if (info.error().empty()) {
      entry.manifest =
          bundles::ParseJsonLimited(info.manifest_json(), "manifest_json");
    }
    out.versions.push_back(std::move(entry));
  }
  for (const auto& [id, version] : response.current()) {
    out.current[id] = version;
  }
  for (const auto& [id, from] : response.inherited()) {
    bundles::InheritedVersion inherited;
    inherited.lock = from.lock_sha();
    inherited.version = from.version();
    auto manifest =
        bundles::ParseJsonLimited(from.manifest_json(), "manifest_json");
    if (manifest.ok()) inherited.manifest = *std::move(manifest);
    out.inherited[id] = std::move(inherited);
  }
  for (const v1::AgreementInfo& info : response.agreements()) {
    bundles::StoredAgreement stored{info.path(),
                                    absl::UnknownError(info.error())};
    if (info.error().empty()) {
      stored.record =
          bundles::ParseJsonLimited(info.record_json(), "record_json");
    }
    out.agreements.push_back(std::move(stored));
  }
  return out;
}

absl::StatusOr<bundles::BundleVersion> DaemonClient::GetBundle(
    const std::string& lock_sha, int version) {
  auto stub = v1::Bundles::NewStub(channel_);
  v1::GetBundleRequest request;
  request.set_lock_sha(lock_sha);
  request.set_version(version);
  v1::GetBundleResponse response;
  const absl::Status got = Call("", [&](grpc::ClientContext& context) {
    const grpc::Status status = stub->Get(&context, request, &response);
    return status.ok() ? absl::OkStatus() : Failed(status, "", &context);
  });
  if (!got.ok()) return got;
  bundles::BundleVersion out;
  out.version = response.version();
  auto manifest =
      bundles::ParseJsonLimited(response.manifest_json(), "manifest_json");
  if (!manifest.ok()) return manifest.status();
  auto artifacts =
      bundles::ParseJsonLimited(response.artifacts_json(), "artifacts_json");
  if (!artifacts.ok()) return artifacts.status();
  out.manifest = *std::move(manifest);
  out.artifacts = *std::move(artifacts);
  return out;
}

absl::StatusOr<std::string> DaemonClient::PutAgreement(
    const std::string& lock_sha, const nlohmann::ordered_json& record) {
  auto stub = v1::Bundles::NewStub(channel_);
  grpc::ClientContext context;
  Prepare(context);
  v1::PutAgreementRequest request;
  request.set_lock_sha(lock_sha);
  request.set_record_json(record.dump());
  v1::PutAgreementResponse response;
  grpc::Status status = stub->PutAgreement(&context, request, &response);
  if (!status.ok()) return Failed(status, "");
  return response.path();
}

absl::StatusOr<int> DaemonClient::PutBundle(
    const std::string& lock_sha, const nlohmann::ordered_json& artifacts,
    const nlohmann::ordered_json& manifest_extra,
    const nlohmann::ordered_json* observations) {
  auto stub = v1::Bundles::NewStub(channel_);
  grpc::ClientContext context;
  Prepare(context);
  v1::PutBundleRequest request;
  request.set_lock_sha(lock_sha);
  request.set_questions_json(QuestionsJsonFor(lock_sha));
  request.set_artifacts_json(artifacts.dump());
  request.set_manifest_json(manifest_extra.dump());
  if (observations != nullptr) {
    request.set_observations_json(observations->dump());
  }
  v1::PutBundleResponse response;
  grpc::Status status = stub->Put(&context, request, &response);
  if (!status.ok()) return Failed(status, "");
  return response.version();
}

absl::StatusOr<bundles::PointerMove> DaemonClient::PromoteBundle(
    const std::string& lock_sha, int version, const std::string& question_id,
    bool force) {
  auto stub = v1::Bundles::NewStub(channel_);
  grpc::ClientContext context;
  Prepare(context);
  v1::PromoteBundleRequest request;
  request.set_lock_sha(lock_sha);
  request.set_questions_json(QuestionsJsonFor(lock_sha));
  request.set_version(version);
  request.set_question_id(question_id);
  request.set_force(force);
  v1::PromoteBundleResponse response;
  grpc::Status status = stub->Promote(&context, request, &response);
  if (!status.ok()) return Failed(status, "");
  return Moved(response);
}

absl::StatusOr<bundles::PointerMove> DaemonClient::RollbackBundle(
    const std::string& lock_sha, const std::string& question_id) {
  auto stub = v1::Bundles::NewStub(channel_);
  grpc::ClientContext context;
  Prepare(context);
  v1::RollbackBundleRequest request;
  request.set_lock_sha(lock_sha);
  request.set_questions_json(QuestionsJsonFor(lock_sha));
  request.set_question_id(question_id);
  v1::RollbackBundleResponse response;
  grpc::Status status = stub->Rollback(&context, request, &response);
  if (!status.ok()) return Failed(status, "");
  return Moved(response);
}

}  // namespace mesa_anyjev::client
