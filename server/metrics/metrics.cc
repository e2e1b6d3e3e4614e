#include "server/metrics/metrics.h"

#include <unistd.h>

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/auth/tenant.h"
#include "common/util/enum_names.h"
#include "common/util/meminfo.h"

namespace mesa_anyjev::metrics {
namespace {

// 1 ms .. 60 s: from a cache hit on the fake to a long prompt on a busy GPU.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
      0.5,   1,      2.5,   5,    10,    30,   60};
  return *buckets;
}

// gRPC's codes are absl's, number for number, and so are their names.
std::string CodeName(int code) {
  std::string name =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

constexpr util::EnumName<Method> kMethodNames[] = {
    {Method::kGetModelInfo, "GetModelInfo"},
    {Method::kTokenize, "Tokenize"},
    {Method::kLogprobs, "Logprobs"},
    {Method::kHiddenStates, "HiddenStates"},
    {Method::kDecide, "Decide"},
    {Method::kFit, "Fit"},
    {Method::kExportArtifacts, "ExportArtifacts"},
    {Method::kLoadArtifacts, "LoadArtifacts"},
    {Method::kResetPriors, "ResetPriors"},
    {Method::kListQuestions, "ListQuestions"},
    {Method::kListBundles, "Bundles.List"},
    {Method::kGetBundle, "Bundles.Get"},
    {Method::kPutBundle, "Bundles.Put"},
    {Method::kPromoteBundle, "Bundles.Promote"},
    {Method::kRollbackBundle, "Bundles.Rollback"},
    {Method::kPutAgreement, "Bundles.PutAgreement"}};
static_assert(util::NamesEvery(
    kMethodNames, static_cast<Method>(static_cast<int>(Method::kCount) - 1)));

}  // namespace

const char* MethodName(Method method) {
  return util::NameIn(kMethodNames, method, "unknown");
}

ServerMetrics::ServerMetrics(const std::string& version,
                             const std::string& commit)
    : registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  BuildGauge()
      .Name("mesa_anyjev_build_info")
      .Help("Always 1; the labels say which build is running.")
      .Register(*registry_)
      .Add({{"version", version}, {"commit", commit}})
      .Set(1);
  requests_ = &BuildCounter()
                   .Name("mesa_anyjev_requests_total")
                   .Help("Finished RPCs by method and gRPC status code.")
                   .Register(*registry_);
  durations_ = &BuildHistogram()
                    .Name("mesa_anyjev_request_duration_seconds")
                    .Help("Time from arrival to status, by method.")
                    .Register(*registry_);
  for (int m = 0; m < static_cast<int>(Method::kCount); ++m) {
    const char* name = MethodName(static_cast<Method>(m));
    duration_by_method_[m] =
        &durations_->Add({{"method", name}}, LatencyBuckets());
    // Pre-initialise the common outcomes so rate() has a zero to start from.
    requests_->Add({{"method", name}, {"code", "OK"}});
  }
  rejected_ = &BuildCounter()
                   .Name("mesa_anyjev_rejected_total")
                   .Help("Calls refused before any work, by reason and tenant.")
                   .Register(*registry_);
  for (const char* reason :
       {"queue_full", "draining", "loading", "unauthenticated",
        "permission_denied", "invalid_priority"}) {
    rejected_->Add({{"reason", reason}, {"tenant", ""}});
  }
  tenant_requests_ =
      &BuildCounter()
           .Name("mesa_anyjev_tenant_requests_total")
           .Help(
               "Finished RPCs past the token and role checks, by tenant, "
               "priority class and gRPC status code.")
           .Register(*registry_);
  priority_capped_ =
      &BuildCounter()
           .Name("mesa_anyjev_priority_capped_total")
           .Help(
               "Calls that asked for interactive and ran as batch, the "
               "tenant's max_priority.")
           .Register(*registry_);
  auto& reloads = BuildCounter()
                      .Name("mesa_anyjev_tokens_file_reloads_total")
                      .Help(
                          "The tokens file read again on SIGHUP, by result "
                          "(failed: the old tenants stay).")
                      .Register(*registry_);
  tokens_reloads_ok_ = &reloads.Add({{"result", "ok"}});
  tokens_reloads_failed_ = &reloads.Add({{"result", "failed"}});
  tokens_reload_successful_ =
      &BuildGauge()
           .Name("mesa_anyjev_tokens_file_last_reload_successful")
           .Help("1 when the tokens file's last reading was taken.")
           .Register(*registry_)
           .Add({});
  tokens_reload_successful_->Set(1);
  tenants_loaded_ = &BuildGauge()
                         .Name("mesa_anyjev_tenants")
                         .Help("Tenants the daemon admits (0: auth off).")
                         .Register(*registry_)
                         .Add({});
  skipped_ =
      &BuildCounter()
           .Name("mesa_anyjev_skipped_total")
           .Help("Accepted calls dropped before the model ran, by reason.")
           .Register(*registry_);
  for (const char* reason : {"deadline", "cancelled"}) {
    skipped_->Add({{"reason", reason}});
  }
  queue_depth_ = &BuildGauge()
                      .Name("mesa_anyjev_queue_depth")
                      .Help("Calls waiting for the model.")
                      .Register(*registry_)
                      .Add({});
  inflight_ = &BuildGauge()
                   .Name("mesa_anyjev_inflight_requests")
                   .Help("RPCs between arrival and status.")
                   .Register(*registry_)
                   .Add({});
  model_loaded_ = &BuildGauge()
                       .Name("mesa_anyjev_model_loaded")
                       .Help("1 once the model answered its warm-up call.")
                       .Register(*registry_)
                       .Add({});
  load_seconds_ = &BuildGauge()
                       .Name("mesa_anyjev_model_load_duration_seconds")
                       .Help("Time the model took to load and warm up.")
                       .Register(*registry_)
                       .Add({});
  prompt_tokens_ = &BuildCounter()
                        .Name("mesa_anyjev_prompt_tokens_total")
                        .Help("Prompt tokens in accepted requests.")
                        .Register(*registry_)
                        .Add({});
  tokens_ = &BuildCounter()
                 .Name("mesa_anyjev_tokens_processed_total")
                 .Help("Tokens the model ran (cached prefixes not counted).")
                 .Register(*registry_)
                 .Add({});
  prompts_ = &BuildCounter()
                  .Name("mesa_anyjev_prompts_processed_total")
                  .Help("Rows the model ran (prompts, suffixes, prefixes).")
                  .Register(*registry_)
                  .Add({});
  batch_size_ = &BuildHistogram()
                     .Name("mesa_anyjev_batch_size")
                     .Help("Segments packed in one forward pass.")
                     .Register(*registry_)
                     .Add({}, prometheus::Histogram::BucketBoundaries{
                                  1, 2, 4, 8, 16, 32, 64, 128});
  batch_tokens_ = &BuildHistogram()
                       .Name("mesa_anyjev_batch_tokens")
                       .Help("New tokens in one forward pass.")
                       .Register(*registry_)
                       .Add({}, prometheus::Histogram::BucketBoundaries{
                                    16, 64, 256, 1024, 4096, 16384, 65536});
  forward_ = &BuildHistogram()
                  .Name("mesa_anyjev_forward_duration_seconds")
                  .Help("Time of one forward pass.")
                  .Register(*registry_)
                  .Add({}, LatencyBuckets());
  auto& lookups = BuildCounter()
                      .Name("mesa_anyjev_prefix_cache_lookups_total")
                      .Help("Prefix cache lookups by result (hit, miss).")
                      .Register(*registry_);
  cache_hits_ = &lookups.Add({{"result", "hit"}});
  cache_misses_ = &lookups.Add({{"result", "miss"}});
  cache_reused_ = &BuildCounter()
                       .Name("mesa_anyjev_prefix_cache_reused_tokens_total")
                       .Help("Prefix tokens served from the cache.")
                       .Register(*registry_)
                       .Add({});
  cache_evictions_ = &BuildCounter()
                          .Name("mesa_anyjev_prefix_cache_evictions_total")
                          .Help("Prefix cache blocks evicted (LRU).")
                          .Register(*registry_)
                          .Add({});
  cache_bytes_ =
      &BuildGauge()
           .Name("mesa_anyjev_prefix_cache_bytes")
           .Help("Bytes of keys and values held by the prefix cache.")
           .Register(*registry_)
           .Add({});
  auto& pool = BuildGauge()
                   .Name("mesa_anyjev_kv_pool_blocks")
                   .Help(
                       "KV pool blocks: in use by work in flight, in the "
                       "prefix cache, in all.")
                   .Register(*registry_);
  pool_in_use_ = &pool.Add({{"state", "in_use"}});
  pool_cached_ = &pool.Add({{"state", "cached"}});
  pool_total_ = &pool.Add({{"state", "total"}});
  pool_bytes_in_use_ =
      &BuildGauge()
           .Name("mesa_anyjev_kv_pool_bytes_in_use")
           .Help("Bytes of the KV pool held by work in flight.")
           .Register(*registry_)
           .Add({});
  auto& queue_wait =
      BuildHistogram()
          .Name("mesa_anyjev_queue_wait_seconds")
          .Help(
              "Time held calls waited for their first work in a pass, by "
              "priority class.")
          .Register(*registry_);
  for (Priority p : {Priority::kInteractive, Priority::kBatch}) {
    queue_wait_[static_cast<size_t>(p)] =
        &queue_wait.Add({{"class", PriorityName(p)}}, LatencyBuckets());
  }
  tenant_tokens_ =
      &BuildCounter()
           .Name("mesa_anyjev_tenant_tokens_total")
           .Help(
               "New tokens run through the model for a tenant's calls, by "
               "priority class.")
           .Register(*registry_);
  tenant_refusals_ = &BuildCounter()
                          .Name("mesa_anyjev_tenant_refusals_total")
                          .Help("Calls of a tenant refused, by reason.")
                          .Register(*registry_);
  compute_ = &BuildHistogram()
                  .Name("mesa_anyjev_job_duration_seconds")
                  .Help("Time the engine thread spent on one call.")
                  .Register(*registry_)
                  .Add({}, LatencyBuckets());
  decisions_ = &prometheus::BuildCounter()
                    .Name("mesa_anyjev_decisions_total")
                    .Help(
                        "Decisions served by level and question id (ids "
                        "past the first 64 count as \"other\").")
                    .Register(*registry_);
  for (const char* level : {"raw", "L0", "L1", "L2"}) {
    decisions_->Add({{"level", level}, {"question", "other"}});
  }
  gateway_attempts_ =
      &prometheus::BuildCounter()
           .Name("mesa_anyjev_gateway_requests_total")
           .Help("Router mode: HTTP attempts to the gateway by outcome.")
           .Register(*registry_);
  for (const char* outcome :
       {"ok", "rejected", "rate_limited", "server_error", "timeout",
        "transport", "tls", "bad_response", "breaker_open", "cancelled"}) {
    gateway_attempts_->Add({{"outcome", outcome}});
  }
  gateway_latency_ = &prometheus::BuildHistogram()
                          .Name("mesa_anyjev_gateway_request_duration_seconds")
                          .Help("Router mode: time of one gateway attempt.")
                          .Register(*registry_)
                          .Add({}, LatencyBuckets());
  gateway_retries_ = &prometheus::BuildCounter()
                          .Name("mesa_anyjev_gateway_retries_total")
                          .Help(
                              "Router mode: gateway attempts repeated after "
                              "429, 5xx or a transport error.")
                          .Register(*registry_)
                          .Add({});
  gateway_missing_ = &prometheus::BuildCounter()
                          .Name("mesa_anyjev_gateway_missing_labels_total")
                          .Help(
                              "Router mode: label ids absent from the "
                              "gateway's top-k (read as -30).")
                          .Register(*registry_)
                          .Add({});
  gateway_breaker_ = &prometheus::BuildGauge()
                          .Name("mesa_anyjev_gateway_breaker_open")
                          .Help(
                              "Router mode: 1 while the gateway's circuit "
                              "breaker is open.")
                          .Register(*registry_)
                          .Add({});
  bundle_version_ = &prometheus::BuildGauge()
                         .Name("mesa_anyjev_bundle_version")
                         .Help(
                             "Bundle version serving each question "
                             "(0 = none).")
                         .Register(*registry_);
  bundles_refused_ = &prometheus::BuildCounter()
                          .Name("mesa_anyjev_bundles_refused_total")
                          .Help(
                              "Stored bundle versions not served because "
                              "they do not load for the served model.")
                          .Register(*registry_)
                          .Add({});
  resident_bytes_ = &prometheus::BuildGauge()
                         .Name("mesa_anyjev_process_resident_memory_bytes")
                         .Help("Resident host memory of the daemon.")
                         .Register(*registry_)
                         .Add({});
  system_available_ =
      &prometheus::BuildGauge()
           .Name("mesa_anyjev_system_memory_available_bytes")
           .Help(
               "The host's MemAvailable: on a GPU that shares the "
               "system's memory (GB10), the device's headroom too.")
           .Register(*registry_)
           .Add({});
  device_info_ = &prometheus::BuildGauge()
                      .Name("mesa_anyjev_device_info")
                      .Help(
                          "Always 1 once a local model is loaded; the "
                          "labels describe its device.")
                      .Register(*registry_);
  auto& device = prometheus::BuildGauge()
                     .Name("mesa_anyjev_device_memory_bytes")
                     .Help(
                         "Accelerator memory held by the model: allocated "
                         "by tensors, reserved by the caching allocator "
                         "(0 on CPU).")
                     .Register(*registry_);
  device_allocated_ = &device.Add({{"kind", "allocated"}});
  device_reserved_ = &device.Add({{"kind", "reserved"}});
}

void ServerMetrics::RecordRequest(Method method, int code,
                                  absl::Duration took) {
  const int m = static_cast<int>(method);
  requests_->Add({{"method", MethodName(method)}, {"code", CodeName(code)}})
      .Increment();
  duration_by_method_[m]->Observe(absl::ToDoubleSeconds(took));
}

void ServerMetrics::RecordRejected(const std::string& reason,
                                   const std::string& tenant) {
  rejected_->Add({{"reason", reason}, {"tenant", tenant}}).Increment();
}

void ServerMetrics::RecordTenantRequest(const std::string& tenant,
                                        Priority priority, int code) {
  tenant_requests_
      ->Add({{"tenant", tenant},
             {"class", PriorityName(priority)},
             {"code", CodeName(code)}})
      .Increment();
}

void ServerMetrics::InitTenant(const std::string& tenant) {
  for (const Priority priority : {Priority::kInteractive, Priority::kBatch}) {
    tenant_requests_->Add({{"tenant", tenant},
                           {"class", PriorityName(priority)},
                           {"code", "OK"}});
  }
  priority_capped_->Add({{"tenant", tenant}});
  rejected_->Add({{"reason", "permission_denied"}, {"tenant", tenant}});
  for (const Priority priority : {Priority::kInteractive, Priority::kBatch}) {
    tenant_tokens_->Add(
        {{"tenant", tenant}, {"class", PriorityName(priority)}});
  }
  for (const char* limit : {"capacity", "tenant_calls", "tenant_tokens"}) {
    tenant_refusals_->Add({{"tenant", tenant}, {"reason", limit}});
  }
}

void ServerMetrics::RecordPriorityCapped(const std::string& tenant) {
  priority_capped_->Add({{"tenant", tenant}}).Increment();
}

void ServerMetrics::RecordTokensReload(bool ok) {
  (ok ? tokens_reloads_ok_ : tokens_reloads_failed_)->Increment();
  tokens_reload_successful_->Set(ok ? 1 : 0);
}

void ServerMetrics::OnQueueDepth(int64_t depth) {
  queue_depth_->Set(static_cast<double>(depth));
}

void ServerMetrics::OnQueueWait(Priority priority, absl::Duration wait) {
  queue_wait_[static_cast<size_t>(priority)]->Observe(
      absl::ToDoubleSeconds(wait));
}

void ServerMetrics::OnRefused(const std::string& tenant,
                              const std::string& limit) {
  tenant_refusals_->Add({{"tenant", tenant}, {"reason", limit}}).Increment();
}

void ServerMetrics::OnTenantTokens(const std::string& tenant, Priority priority,
                                   int64_t tokens) {
  tenant_tokens_->Add({{"tenant", tenant}, {"class", PriorityName(priority)}})
      .Increment(static_cast<double>(tokens));
}

void ServerMetrics::OnSkipped(const std::string& reason) {
  skipped_->Add({{"reason", reason}}).Increment();
}

void ServerMetrics::OnRun(absl::Duration took) {
  compute_->Observe(absl::ToDoubleSeconds(took));
}

}  // namespace mesa_anyjev::metrics

namespace mesa_anyjev::metrics {

void ServerMetrics::OnPass(const engine::PassRecord& pass) {
  prompts_->Increment(static_cast<double>(pass.segments));
  tokens_->Increment(static_cast<double>(pass.tokens));
  batch_size_->Observe(static_cast<double>(pass.segments));
  batch_tokens_->Observe(static_cast<double>(pass.tokens));
  forward_->Observe(absl::ToDoubleSeconds(pass.took));
}

void ServerMetrics::OnPrefixLookups(int64_t hits, int64_t misses,
                                    int64_t reused_tokens) {
  cache_hits_->Increment(static_cast<double>(hits));
  cache_misses_->Increment(static_cast<double>(misses));
  cache_reused_->Increment(static_cast<double>(reused_tokens));
}

void ServerMetrics::OnPrefixEvictions(int64_t blocks) {
  cache_evictions_->Increment(static_cast<double>(blocks));
}

void ServerMetrics::OnKvPool(int64_t in_use, int64_t cached, int64_t total,
                             int64_t block_bytes) {
  pool_in_use_->Set(static_cast<double>(in_use));
  pool_cached_->Set(static_cast<double>(cached));
  pool_total_->Set(static_cast<double>(total));
  pool_bytes_in_use_->Set(static_cast<double>(in_use * block_bytes));
  cache_bytes_->Set(static_cast<double>(cached * block_bytes));
}

void ServerMetrics::RecordDecisions(const std::string& level,
                                    const std::string& question, double n) {
  std::string label = "other";
  {
    absl::MutexLock lock(&questions_mu_);
    if (question_labels_.contains(question) ||
        (question_labels_.size() < kMaxQuestionLabels && !question.empty())) {
      question_labels_.insert(question);
      label = question;
    }
  }
  decisions_->Add({{"level", level}, {"question", label}}).Increment(n);
}

void ServerMetrics::OnGatewayAttempt(const char* outcome, absl::Duration took) {
  gateway_attempts_->Add({{"outcome", outcome}}).Increment();
  if (took > absl::ZeroDuration()) {
    gateway_latency_->Observe(absl::ToDoubleSeconds(took));
  }
}

void ServerMetrics::SetBundleVersion(const std::string& question,
                                     double version) {
  bundle_version_->Add({{"question", question}}).Set(version);
}

void ServerMetrics::RefreshProcessMemory() {
  // statm: size resident shared ... in pages.
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  if (statm >> size >> resident) {
    resident_bytes_->Set(static_cast<double>(resident) *
                         static_cast<double>(sysconf(_SC_PAGESIZE)));
  }
  if (auto available = util::ReadMemAvailable(); available.ok()) {
    system_available_->Set(static_cast<double>(*available));
  }
}

void ServerMetrics::SetDeviceInfo(const DeviceInfo& info) {
  device_info_
      ->Add({{"device_name", info.name},
             {"compute_capability", info.compute_capability},
             {"integrated", info.shared_memory ? "true" : "false"},
             {"driver_cuda", info.driver_cuda},
             {"runtime_cuda", info.runtime_cuda}})
      .Set(1);
}

void ServerMetrics::SetDeviceMemory(double allocated_bytes,
                                    double reserved_bytes) {
  device_allocated_->Set(allocated_bytes);
  device_reserved_->Set(reserved_bytes);
}

}  // namespace mesa_anyjev::metrics
