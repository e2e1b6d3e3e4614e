// The Bundles service (see bundles_service.h).
#include "server/service/bundles_service.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bundles/agreement_record.h"
#include "common/questions/question_lock.h"
#include "common/status/status_macros.h"
#include "common/text/utf8.h"
#include "server/service/call_admission.h"
#include "server/service/unary_call.h"

namespace mesa_anyjev::service {

namespace v1 = ::mesa::anyjev::v1;
namespace fs = std::filesystem;
using bundles::BundleStore;
using bundles::Json;
using metrics::Method;

namespace {

absl::Status CheckSize(const std::string& field, const std::string& bytes,
                       int64_t limit) {
  if (static_cast<int64_t>(bytes.size()) <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", bytes.size(), " bytes exceed the limit of ",
                   limit, " bytes (limits.max_bundle_bytes)"));
}

absl::Status CheckVersion(int32_t version) {
  if (version >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("version: ", version, " is not a version (>= 1)"));
}

Json EmptyFile(const std::string& model) {
  return Json{{"model", model},
              {"artifacts", Json::object()},
              {"heads", Json::object()}};
}

}  // namespace

BundlesService::BundlesService(BundlesOptions options,
                               metrics::ServerMetrics* metrics, CallGate gate)
    : options_(std::move(options)),
      metrics_(metrics),
      gate_(gate),
      worker_("bundle store", 1, options_.queue_capacity) {}

BundlesService::~BundlesService() { Stop(); }

void BundlesService::Stop() { worker_.Stop(); }

absl::Status BundlesService::Start(Backend* backend,
                                   decision::Decider* decider) {
  absl::MutexLock lock(&mu_);
  backend_ = backend;
  decider_ = decider;
  if (options_.dir.empty()) return absl::OkStatus();
  const std::string lock_sha =
      BundleStore::LastMovedLock(options_.dir, backend->identity().name);
  if (lock_sha.empty()) {
    spdlog::info("bundles: nothing promoted under {} for '{}'", options_.dir,
                 backend->identity().name);
    return absl::OkStatus();
  }
  auto store = StoreFor(lock_sha);
  if (!store.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("decisions.bundles_dir: ", store.status().message()));
  }
  return ServeFrom(*store);
}

absl::StatusOr<BundleStore*> BundlesService::StoreFor(
    const std::string& lock_sha, const std::string& questions_json) {
  if (options_.dir.empty()) {
    return absl::FailedPreconditionError(
        "this daemon keeps no bundle store (decisions.bundles_dir is off)");
  }
  if (backend_ == nullptr) return absl::UnavailableError("no model loaded");
  auto it = stores_.find(lock_sha);
  if (it == stores_.end()) {
    bundles::StoreOptions store_options;
    store_options.max_file_bytes = options_.max_bundle_bytes;
    const ModelIdentity& identity = backend_->identity();
    ASSIGN_OR_RETURN(
        auto store,
        BundleStore::Open(options_.dir, {identity.name, identity.identity},
                          lock_sha, store_options));
    it = stores_.emplace(lock_sha, std::move(store)).first;
  }
  if (!questions_json.empty()) {
    RETURN_IF_ERROR(
        CheckSize("questions_json", questions_json, options_.max_bundle_bytes));
    ASSIGN_OR_RETURN(
        const Json questions,
        bundles::ParseJsonLimited(questions_json, "questions_json"));
    const std::string sha = questions::LockShaOf(questions);
    if (!sha.starts_with(lock_sha)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "questions_json: hashes to ", sha, ", not to lock_sha ", lock_sha));
    }
    RETURN_IF_ERROR(it->second->KeepLockQuestions(questions));
  }
  return it->second.get();
}

absl::Status BundlesService::CheckLoads(BundleStore* store, int version,
                                        const std::string& question_id) {
  ASSIGN_OR_RETURN(const bundles::BundleVersion read, store->Get(version));
  auto key = bundles::QuestionKey(version, read.manifest, question_id);
  if (!key.ok()) return key.status();  // Promote names it the same way
  // A scratch store over the same model: nothing runs on the model, and
  // the live decider is untouched if the entries are refused.
  decision::ArtifactStore scratch(backend_);
  absl::Status loads = scratch.ReplaceKey(*key, read.artifacts);
  if (loads.ok()) return loads;
  return absl::FailedPreconditionError(absl::StrCat(
      "v", version, " does not load for ", question_id, ": ", loads.message()));
}

absl::Status BundlesService::CheckServable(const Json& artifacts) {
  const std::string& served = backend_->identity().name;
  if (!artifacts.is_object() || !artifacts.contains("model") ||
      !artifacts["model"].is_string()) {
    return absl::InvalidArgumentError(
        "artifacts_json: no \"model\" naming the model it was fit on");
  }
  if (artifacts["model"].get<std::string>() != served) {
    return absl::FailedPreconditionError(absl::StrCat(
        "artifacts_json: fit on '",
        text::Printable(artifacts["model"].get<std::string>()),
        "', the served model is '", served,
        "'; another model's bundle loads only through `mesa-anyjev bundles "
        "adopt`, once `mesa-anyjev bench compare` shows the two agree"));
  }
  // Loaded whole into a scratch store over the same model, as serving
  // would load it: nothing runs on the model and nothing is written yet.
  decision::ArtifactStore scratch(backend_);
  auto loaded = scratch.Load(artifacts);
  if (loaded.ok()) return absl::OkStatus();
  return absl::Status(
      loaded.status().code(),
      absl::StrCat("artifacts_json: ", loaded.status().message()));
}

absl::Status BundlesService::ServeFrom(BundleStore* store) {
  ASSIGN_OR_RETURN(bundles::ServedSet served, store->Served());
  for (const std::string& why : served.refused) {
    spdlog::warn("bundles: not served: {}", why);
  }
  const std::string lock8 = store->lock_sha().substr(0, 8);
  std::set<std::string> keep;
  std::set<std::string> refused;  // question ids
  for (const auto& [id, key] : served.keys) keep.insert(key);
  // New and changed keys first, so no question passes through "none".
  for (const auto& [id, key] : served.keys) {
    const auto was = served_versions_.find(id);
    const auto was_key = served_keys_.find(id);
    if (lock8 == served_lock_ && was != served_versions_.end() &&
        was->second == served.versions[id] && was_key != served_keys_.end() &&
        was_key->second == key) {
      continue;
    }
    absl::Status loaded = decider_->artifacts().ReplaceKey(key, served.file);
    if (!loaded.ok()) {
      // Not served, and the rest still are: a bad stored version must not
      // stop the daemon at every start.
      spdlog::error("bundles: not serving v{} of {}: {}", served.versions[id],
                    id, std::string(loaded.message()));
      metrics_->OnBundleRefused();
      refused.insert(id);
    }
  }
  for (const std::string& id : refused) {
    keep.erase(served.keys[id]);
    served.keys.erase(id);
    served.versions.erase(id);
  }
  for (const auto& [id, key] : served_keys_) {
    if (!keep.contains(key)) {
      RETURN_IF_ERROR(decider_->artifacts().ReplaceKey(
          key, EmptyFile(store->model().model)));
    }
  }
  std::vector<std::string> lines;
  for (const auto& [id, n] : served.versions) {
    lines.push_back(absl::StrCat(id, "=v", n));
  }
  if (lock8 != served_lock_ || served.versions != served_versions_) {
    spdlog::info("bundles: serving {} question(s) from {}: {}",
                 served.versions.size(), store->dir(),
                 absl::StrJoin(lines, ", "));
  }
  // The version gauge: questions no longer served read 0.
  for (const auto& [id, n] : served_versions_) {
    if (!served.versions.contains(id)) metrics_->SetBundleVersion(id, 0);
  }
  for (const auto& [id, n] : served.versions) {
    metrics_->SetBundleVersion(id, n);
  }
  served_lock_ = lock8;
  served_keys_ = std::move(served.keys);
  served_versions_ = std::move(served.versions);
  std::map<std::string, ServedBundle> snapshot;
  for (const auto& [id, key] : served_keys_) {
    snapshot[id] = ServedBundle{key, served_versions_[id]};
  }
  absl::MutexLock lock(&served_mu_);
  served_ = std::move(snapshot);
  return absl::OkStatus();
}

std::map<std::string, ServedBundle> BundlesService::Served() const {
  absl::MutexLock lock(&served_mu_);
  return served_;
}

template <typename Request, typename Response, typename Work>
grpc::ServerUnaryReactor* BundlesService::Run(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response, Method method, Work work) {
  const auto opened = OpenCall<Request, Response>(
      context, metrics_, method, gate_, raw_request, raw_response);
  if (!opened.ok()) return opened.call;
  UnaryCall* call = opened.call;
  absl::Status submitted = worker_.TrySubmit(
      [this, call, request = opened.request, response = opened.response,
       work = std::move(work)]() mutable {
        absl::Status status;
        {
          absl::MutexLock lock(&mu_);
          status = work(request, response);
        }
        call->Complete(status);
      });
  call->Submitted(submitted);
  return call;
}

grpc::ServerUnaryReactor* BundlesService::List(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Run<v1::ListBundlesRequest, v1::ListBundlesResponse>(
      context, raw_request, raw_response, Method::kListBundles,
      [this](const v1::ListBundlesRequest* request,
             v1::ListBundlesResponse* response) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        ASSIGN_OR_RETURN(
            BundleStore * store,
            StoreFor(request->lock_sha(), request->questions_json()));
        ASSIGN_OR_RETURN(const auto versions, store->List());
        ASSIGN_OR_RETURN(const auto current, store->CurrentAll());
        response->set_model(store->model().model);
        response->set_dir(store->dir());
        for (const auto& entry : versions) {
          v1::BundleVersionInfo* info = response->add_versions();
          info->set_version(entry.version);
          info->set_path(entry.path);
          if (entry.manifest.ok()) {
            info->set_manifest_json(entry.manifest->dump());
          } else {
            info->set_error(std::string(entry.manifest.status().message()));
          }
        }
        for (const auto& [id, n] : current) {
          (*response->mutable_current())[id] = n;
        }
        response->set_served_lock_sha(served_lock_);
        if (absl::Status writable = store->CheckWritable(); !writable.ok()) {
          response->set_write_error(std::string(writable.message()));
        }
        if (const auto keys = store->LockKeys(); keys.has_value()) {
          for (const auto& [id, from] : store->Inherited(*keys)) {
            v1::InheritedBundle& out = (*response->mutable_inherited())[id];
            out.set_lock_sha(from.lock);
            out.set_version(from.version);
            out.set_manifest_json(from.manifest.dump());
          }
        }
        for (const auto& stored : bundles::ListAgreements(store->dir())) {
          v1::AgreementInfo* info = response->add_agreements();
          info->set_path(stored.path);
          if (stored.record.ok()) {
            info->set_record_json(stored.record->dump());
          } else {
            info->set_error(std::string(stored.record.status().message()));
          }
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* BundlesService::Get(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Run<v1::GetBundleRequest, v1::GetBundleResponse>(
      context, raw_request, raw_response, Method::kGetBundle,
      [this](const v1::GetBundleRequest* request,
             v1::GetBundleResponse* response) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        RETURN_IF_ERROR(CheckVersion(request->version()));
        ASSIGN_OR_RETURN(BundleStore * store, StoreFor(request->lock_sha()));
        ASSIGN_OR_RETURN(const auto read, store->Get(request->version()));
        response->set_version(read.version);
        response->set_manifest_json(read.manifest.dump());
        response->set_artifacts_json(read.artifacts.dump());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* BundlesService::Put(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Run<v1::PutBundleRequest, v1::PutBundleResponse>(
      context, raw_request, raw_response, Method::kPutBundle,
      [this](const v1::PutBundleRequest* request,
             v1::PutBundleResponse* response) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        const int64_t limit = options_.max_bundle_bytes;
        RETURN_IF_ERROR(
            CheckSize("artifacts_json", request->artifacts_json(), limit));
        RETURN_IF_ERROR(
            CheckSize("manifest_json", request->manifest_json(), limit));
        RETURN_IF_ERROR(CheckSize("observations_json",
                                  request->observations_json(), limit));
        ASSIGN_OR_RETURN(const Json artifacts,
                         bundles::ParseJsonLimited(request->artifacts_json(),
                                                   "artifacts_json"));
        ASSIGN_OR_RETURN(const Json manifest,
                         bundles::ParseJsonLimited(request->manifest_json(),
                                                   "manifest_json"));
        std::optional<Json> observations;
        if (!request->observations_json().empty()) {
          ASSIGN_OR_RETURN(observations, bundles::ParseJsonLimited(
                                             request->observations_json(),
                                             "observations_json"));
        }
        ASSIGN_OR_RETURN(
            BundleStore * store,
            StoreFor(request->lock_sha(), request->questions_json()));
        RETURN_IF_ERROR(CheckServable(artifacts));
        ASSIGN_OR_RETURN(
            const int version,
            store->Put(artifacts, manifest,
                       observations.has_value() ? &*observations : nullptr));
        response->set_version(version);
        response->set_path(
            (fs::path(store->dir()) / absl::StrCat("v", version)).string());
        return absl::OkStatus();
      });
}

template <typename Response>
absl::Status BundlesService::AnswerMove(BundleStore* store,
                                        const bundles::PointerMove& moved,
                                        Response* response) {
  response->set_version(moved.version);
  if (moved.previous.has_value()) response->set_previous(*moved.previous);
  RETURN_IF_ERROR(ServeFrom(store));
  response->set_served(true);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* BundlesService::Promote(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Run<v1::PromoteBundleRequest, v1::PromoteBundleResponse>(
      context, raw_request, raw_response, Method::kPromoteBundle,
      [this](const v1::PromoteBundleRequest* request,
             v1::PromoteBundleResponse* response)
          ABSL_NO_THREAD_SAFETY_ANALYSIS {
            RETURN_IF_ERROR(CheckVersion(request->version()));
            RETURN_IF_ERROR(bundles::CheckQuestionId(request->question_id()));
            ASSIGN_OR_RETURN(
                BundleStore * store,
                StoreFor(request->lock_sha(), request->questions_json()));
            RETURN_IF_ERROR(
                CheckLoads(store, request->version(), request->question_id()));
            ASSIGN_OR_RETURN(
                const auto moved,
                store->Promote(request->version(), request->question_id(),
                               request->force()));
            return AnswerMove(store, moved, response);
          });
}

grpc::ServerUnaryReactor* BundlesService::Rollback(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Run<v1::RollbackBundleRequest, v1::RollbackBundleResponse>(
      context, raw_request, raw_response, Method::kRollbackBundle,
      [this](const v1::RollbackBundleRequest* request,
             v1::RollbackBundleResponse* response)
          ABSL_NO_THREAD_SAFETY_ANALYSIS {
            RETURN_IF_ERROR(bundles::CheckQuestionId(request->question_id()));
            ASSIGN_OR_RETURN(
                BundleStore * store,
                StoreFor(request->lock_sha(), request->questions_json()));
            ASSIGN_OR_RETURN(const auto moved,
                             store->Rollback(request->question_id()));
            return AnswerMove(store, moved, response);
          });
}

grpc::ServerUnaryReactor* BundlesService::PutAgreement(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  return Run<v1::PutAgreementRequest, v1::PutAgreementResponse>(
      context, raw_request, raw_response, Method::kPutAgreement,
      [this](
          const v1::PutAgreementRequest* request,
          v1::PutAgreementResponse* response) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        RETURN_IF_ERROR(CheckSize("record_json", request->record_json(),
                                  options_.max_bundle_bytes));
        ASSIGN_OR_RETURN(
            const Json record,
            bundles::ParseJsonLimited(request->record_json(), "record_json"));
        RETURN_IF_ERROR(bundles::CheckAgreementRecord(record));
        ASSIGN_OR_RETURN(BundleStore * store, StoreFor(request->lock_sha()));
        if (!record["questions_lock_sha"].get<std::string>().starts_with(
                store->lock_sha())) {
          return absl::InvalidArgumentError(
              absl::StrCat("record_json: measured under questions lock ",
                           record["questions_lock_sha"].dump(),
                           ", not lock_sha ", store->lock_sha()));
        }
        ASSIGN_OR_RETURN(
            const std::string path,
            bundles::WriteAgreement(store->dir(), store->model(), record));
        spdlog::info("bundles: agreement record kept at {}", path);
        response->set_path(path);
        return absl::OkStatus();
      });
}

}  // namespace mesa_anyjev::service
