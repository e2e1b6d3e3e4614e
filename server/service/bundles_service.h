// mesa.anyjev.v1.Bundles on gRPC's callback API: the bundle store
// (common/bundles) under decisions.bundles_dir for the daemon's own model,
// and hot pickup: a Promote or Rollback swaps the moved question's artifact
// and head in the live Decider (Decider::ReplaceKeyArtifacts), so calls in
// flight finish on the old version and later ones see the new one.
//
// Handlers check the token, role and state on the gRPC thread, then run on one
// store worker (file I/O and fsync never hold a gRPC thread; one worker also
// orders every mutation). The decider serves one lock directory: at start
// the one whose pointers moved last, then the lock of each Promote or
// Rollback.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/backend.h"
#include "common/bundles/bundle_store.h"
#include "common/decision/decider.h"
#include "mesa/anyjev/v1/bundles.grpc.pb.h"
#include "server/metrics/metrics.h"
#include "server/service/call_admission.h"
#include "server/service/worker_pool.h"

namespace mesa_anyjev::service {

// What the decider serves for one question id from the bundle store.
struct ServedBundle {
  std::string key;  // the question key the version's entry is for
  int version = 0;
};

struct BundlesOptions {
  std::string
      dir;  // resolved; "" = no store: every call is FAILED_PRECONDITION
  int64_t max_bundle_bytes = 8 << 20;  // per file, and per request field
  int32_t queue_capacity = 16;         // calls waiting for the store worker
};

// Every method takes its request as bytes (request_parse.h).
using RawServiceBundles =
    ::mesa::anyjev::v1::Bundles::WithRawCallbackMethod_List<
        ::mesa::anyjev::v1::Bundles::WithRawCallbackMethod_Get<
            ::mesa::anyjev::v1::Bundles::WithRawCallbackMethod_Put<
                ::mesa::anyjev::v1::Bundles::WithRawCallbackMethod_Promote<
                    ::mesa::anyjev::v1::Bundles::WithRawCallbackMethod_Rollback<
                        ::mesa::anyjev::v1::Bundles::
                            WithRawCallbackMethod_PutAgreement<
                                ::mesa::anyjev::v1::Bundles::Service>>>>>>;

class BundlesService final : public RawServiceBundles {
 public:
  BundlesService(BundlesOptions options, metrics::ServerMetrics* metrics,
                 CallGate gate);
  ~BundlesService() override;

  // After the model loaded, before SERVING: binds the store to `backend`'s
  // model and identity and loads every question's CURRENT version of the
  // most recently moved lock into `decider`. Versions that fail
  // verification or binding are logged and left out (that question serves
  // below L1/L2); INVALID_ARGUMENT when the directory cannot be used.
  absl::Status Start(Backend* backend, decision::Decider* decider);
  void Stop();

  // The version served for each question id (none without a store). Read
  // without waiting for the store worker, which may be writing.
  std::map<std::string, ServedBundle> Served() const;

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* raw_request,
                                 grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* raw_request,
                                grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* raw_request,
                                grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Promote(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* raw_request,
                                    grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Rollback(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* raw_request,
                                     grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* PutAgreement(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
      grpc::ByteBuffer* raw_response) override;

 private:
  // Admits the call and runs `work` on the store worker, finishing the call
  // with its status.
  // `work` gets the parsed request and the response to fill.
  template <typename Request, typename Response, typename Work>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* raw_request,
                                grpc::ByteBuffer* raw_response,
                                metrics::Method method, Work work);
  // The store of `lock_sha`; with `questions_json` (the lock's questions
  // mapping, checked against the sha) recorded there when it is not yet.
  absl::StatusOr<bundles::BundleStore*> StoreFor(
      const std::string& lock_sha, const std::string& questions_json = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the version's entries for the question load into a decider of
  // this model, without touching the live one.
  absl::Status CheckLoads(bundles::BundleStore* store, int version,
                          const std::string& question_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What Put refuses before writing: artifacts not naming the served model,
  // or not loading for it (a head's block, width, K, finite values).
  absl::Status CheckServable(const bundles::Json& artifacts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the live decider serve `store`'s CURRENT versions: changed keys
  // replaced, keys no longer served dropped. A version that does not load
  // is logged, counted and left out; the rest are served.
  absl::Status ServeFrom(bundles::BundleStore* store)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A promote's or rollback's answer (the pointer as moved), once the live
  // decider serves the store again.
  template <typename Response>
  absl::Status AnswerMove(bundles::BundleStore* store,
                          const bundles::PointerMove& moved, Response* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BundlesOptions options_;
  metrics::ServerMetrics* const metrics_;
  const CallGate gate_;
  WorkerPool worker_;

  absl::Mutex mu_;
  Backend* backend_ ABSL_GUARDED_BY(mu_) = nullptr;
  decision::Decider* decider_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, std::unique_ptr<bundles::BundleStore>> stores_
      ABSL_GUARDED_BY(mu_);
  std::string served_lock_ ABSL_GUARDED_BY(mu_);  // lock_sha[:8] served
  std::map<std::string, std::string> served_keys_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> served_versions_ ABSL_GUARDED_BY(mu_);
  // A copy of served_keys_ and served_versions_ for Served().
  mutable absl::Mutex served_mu_;
  std::map<std::string, ServedBundle> served_ ABSL_GUARDED_BY(served_mu_);
};

}  // namespace mesa_anyjev::service
