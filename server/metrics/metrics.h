// All Prometheus families of mesa-anyjevd in one struct that is passed in,
// never a global. Names follow docs/operations.md: mesa_anyjev_ prefix, base
// units, label values from closed sets only.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "common/gateway/gateway_backend.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/engine/engine_observer.h"

namespace mesa_anyjev::metrics {

// The RPC methods the daemon serves; the `method` label takes only these.
enum class Method {
  kGetModelInfo,
  kTokenize,
  kLogprobs,
  kHiddenStates,
  kDecide,
  kFit,
  kExportArtifacts,
  kLoadArtifacts,
  kResetPriors,
  kListQuestions,
  kListBundles,
  kGetBundle,
  kPutBundle,
  kPromoteBundle,
  kRollbackBundle,
  kPutAgreement,
  kCount
};
const char* MethodName(Method method);

class ServerMetrics : public engine::EngineObserver,
                      public gateway::GatewayObserver {
 public:
  ServerMetrics(const std::string& version, const std::string& commit);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished call: `code` is the gRPC status code number (0..16).
  void RecordRequest(Method method, int code, absl::Duration took);
  void AddInflight(double delta) { inflight_->Increment(delta); }
  // A call refused before any work: `reason` queue_full, draining, loading,
  // unauthenticated, permission_denied or invalid_priority (the class
  // metadata names no class); `tenant` "" when the call named none (no or an
  // unknown token, or auth off).
  void RecordRejected(const std::string& reason, const std::string& tenant);

  // Tenants (docs/operations.md): tenant names come from the tokens file,
  // so these label sets are bounded by it.
  // A finished call that passed its token and role checks, by tenant, the
  // class it ran at and its code.
  void RecordTenantRequest(const std::string& tenant, Priority priority,
                           int code);
  // A call that asked for interactive and was served as batch (the
  // tenant's max_priority).
  void RecordPriorityCapped(const std::string& tenant);
  // A tenant loaded: its series start at 0, so rate() has a zero to start
  // from.
  void InitTenant(const std::string& tenant);
  // The tokens file read again (SIGHUP): taken, or refused (the old
  // tenants stay).
  void RecordTokensReload(bool ok);
  void SetTenantsLoaded(size_t tenants) {
    tenants_loaded_->Set(static_cast<double>(tenants));
  }
  void SetModelLoaded(bool loaded) { model_loaded_->Set(loaded ? 1 : 0); }
  void SetModelLoadSeconds(double seconds) { load_seconds_->Set(seconds); }
  void AddPromptTokens(double tokens) { prompt_tokens_->Increment(tokens); }

  // Decisions served, by level and question id. Question ids come from
  // callers, so only the first kMaxQuestionLabels distinct ids get their own
  // series; the rest count under "other" (a bounded label set).
  static constexpr int kMaxQuestionLabels = 64;
  void RecordDecisions(const std::string& level, const std::string& question,
                       double n);
  // The bundle version serving a question (0 = none).
  void SetBundleVersion(const std::string& question, double version);
  // A stored version the daemon refused to serve (it does not load for the
  // served model); the daemon serves the rest.
  void OnBundleRefused() { bundles_refused_->Increment(); }
  // Host memory (this process's resident set, read from /proc at scrape
  // time) and, where the model has one, device memory.
  // The host's MemAvailable is read then too.
  void RefreshProcessMemory();
  void SetDeviceMemory(double allocated_bytes, double reserved_bytes);
  // mesa_anyjev_device_info, once the model is loaded.
  void SetDeviceInfo(const DeviceInfo& info);

  // gateway::GatewayObserver (router mode; zero elsewhere)
  void OnGatewayAttempt(const char* outcome, absl::Duration took) override;
  void OnGatewayRetry() override { gateway_retries_->Increment(); }
  void OnGatewayMissingLabel() override { gateway_missing_->Increment(); }
  void OnGatewayBreaker(bool open) override {
    gateway_breaker_->Set(open ? 1 : 0);
  }

  // engine::EngineObserver: the held calls, the scheduler, the passes
  void OnQueueDepth(int64_t depth) override;
  void OnRefused(const std::string& tenant, const std::string& limit) override;
  void OnQueueWait(Priority priority, absl::Duration wait) override;
  void OnSkipped(const std::string& reason) override;
  void OnRun(absl::Duration took) override;
  void OnTenantTokens(const std::string& tenant, Priority priority,
                      int64_t tokens) override;
  void OnPass(const engine::PassRecord& pass) override;
  void OnPrefixLookups(int64_t hits, int64_t misses,
                       int64_t reused_tokens) override;
  void OnPrefixEvictions(int64_t blocks) override;
  void OnKvPool(int64_t in_use, int64_t cached, int64_t total,
                int64_t block_bytes) override;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* durations_;
  std::array<prometheus::Histogram*, static_cast<int>(Method::kCount)>
      duration_by_method_{};
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Counter>* tenant_requests_;
  prometheus::Family<prometheus::Counter>* priority_capped_;
  prometheus::Counter* tokens_reloads_ok_;
  prometheus::Counter* tokens_reloads_failed_;
  prometheus::Gauge* tokens_reload_successful_;
  prometheus::Gauge* tenants_loaded_;
  prometheus::Family<prometheus::Counter>* skipped_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* inflight_;
  prometheus::Gauge* model_loaded_;
  prometheus::Gauge* load_seconds_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* tokens_;
  prometheus::Counter* prompts_;
  prometheus::Histogram* batch_size_;
  prometheus::Histogram* batch_tokens_;
  prometheus::Histogram* forward_;
  prometheus::Counter* cache_hits_;
  prometheus::Counter* cache_misses_;
  prometheus::Counter* cache_reused_;
  prometheus::Counter* cache_evictions_;
  prometheus::Gauge* cache_bytes_;
  prometheus::Gauge* pool_in_use_;
  prometheus::Gauge* pool_cached_;
  prometheus::Gauge* pool_total_;
  prometheus::Gauge* pool_bytes_in_use_;
  std::array<prometheus::Histogram*, 2> queue_wait_{};  // by class
  prometheus::Family<prometheus::Counter>* tenant_tokens_;
  prometheus::Family<prometheus::Counter>* tenant_refusals_;
  prometheus::Histogram* compute_;
  prometheus::Family<prometheus::Counter>* decisions_;
  prometheus::Family<prometheus::Counter>* gateway_attempts_;
  prometheus::Histogram* gateway_latency_;
  prometheus::Counter* gateway_retries_;
  prometheus::Counter* gateway_missing_;
  prometheus::Gauge* gateway_breaker_;
  prometheus::Family<prometheus::Gauge>* bundle_version_;
  prometheus::Counter* bundles_refused_;
  prometheus::Gauge* resident_bytes_;
  prometheus::Gauge* system_available_;
  prometheus::Family<prometheus::Gauge>* device_info_;
  prometheus::Gauge* device_allocated_;
  prometheus::Gauge* device_reserved_;
  absl::Mutex questions_mu_;
  absl::flat_hash_set<std::string> question_labels_
      ABSL_GUARDED_BY(questions_mu_);
};

}  // namespace mesa_anyjev::metrics
