#include "common/config/config_validator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/backend.h"  // kMaxChoiceOptions
#include "common/config/config_schema.h"
#include "common/config/kernel_set.h"
#include "common/status/status_macros.h"
#include "common/util/host_port.h"

namespace mesa_anyjev::config {

using schema::Accessor;
using schema::Field;
using schema::Fields;
using schema::FieldType;
using schema::FormatDouble;
using schema::ParseInt;
using schema::Quote;

namespace {

// ---------------------------------------------------------------------------
// Validation of the merged result.

bool IsDevice(absl::string_view device) {
  if (device == "cpu" || device == "cuda") return true;
  if (!absl::StartsWith(device, "cuda:")) return false;
  const absl::string_view index = device.substr(5);
  return !index.empty() &&
         index.find_first_not_of("0123456789") == absl::string_view::npos &&
         ParseInt<int32_t>(index).ok();
}

class Validator {
 public:
  Validator(const Config& config,
            const std::map<std::string, std::string, std::less<>>& origins)
      : config_(config), origins_(origins) {}

  // The daemon's keys, then the CLI's, then the rules every field of a kind
  // follows; all errors in one message, in this order.
  absl::Status Run() {
    CheckServer();
    CheckModelAndEngine();
    CheckClient();
    CheckDeciderAndPolicy();
    CheckStores();
    for (const Field& field : Fields()) {
      if (field.section() == "limits") CheckLimit(field);
      if (field.type == FieldType::kEnum) CheckEnum(field);
    }
    if (errors_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", absl::StrJoin(errors_, "; ")));
  }

 private:
  void CheckServer() {
    const ServerConfig& s = config_.server;
    HostPort("server.listen", s.listen);
    if (!s.metrics_listen.empty()) {
      HostPort("server.metrics_listen", s.metrics_listen);
    }
    Range<int64_t>("server.queue_capacity", s.queue_capacity, 1, 100000);
    Positive("server.default_deadline_s", s.default_deadline_s);
    Positive("server.max_deadline_s", s.max_deadline_s);
    if (s.default_deadline_s > s.max_deadline_s) {
      Error("server.default_deadline_s",
            absl::StrCat(FormatDouble(s.default_deadline_s),
                         " must be <= server.max_deadline_s (",
                         FormatDouble(s.max_deadline_s), ")"));
    }
    NonNegative("server.drain_deadline_s", s.drain_deadline_s);
    NonNegative("server.drain_grace_s", s.drain_grace_s);
    constexpr int64_t kMaxMessage = (int64_t{2} << 30) - 1;  // gRPC: int
    Range<int64_t>("server.max_receive_message_bytes",
                   s.max_receive_message_bytes, 1024, kMaxMessage);
    Range<int64_t>("server.max_send_message_bytes", s.max_send_message_bytes,
                   1024, kMaxMessage);
    Range<int64_t>("server.max_concurrent_streams", s.max_concurrent_streams, 1,
                   std::numeric_limits<int32_t>::max());
    if (s.tls_cert.empty() != s.tls_key.empty()) {
      const bool cert = !s.tls_cert.empty();
      Error(cert ? "server.tls_cert" : "server.tls_key",
            absl::StrCat("is set but ",
                         cert ? "server.tls_key" : "server.tls_cert",
                         " is empty; TLS needs both or neither"));
    }
    const AuthConfig& a = config_.auth;
    if (!a.tokens_file.empty() &&
        (!a.token_env.empty() || !a.token_file.empty())) {
      Error("auth.tokens_file",
            absl::StrCat("is set with auth.",
                         a.token_env.empty() ? "token_file" : "token_env",
                         "; use one: the tokens file's tenants, or the "
                         "single token (tenant 'default', role admin)"));
    }
  }

  void CheckModelAndEngine() {
    const ModelConfig& m = config_.model;
    if (m.path.empty()) {
      Error("model.path", "is empty (a checkpoint directory or \"fake\")");
    }
    if (!IsDevice(m.device)) {
      Error("model.device",
            absl::StrCat(Quote(m.device), " is not cpu, cuda or cuda:N"));
    }
    if (const auto kernels = ParseKernelSet(m.kernels); !kernels.ok()) {
      Error("model.kernels", kernels.status().message());
    }
    Range<int64_t>("model.threads", m.threads, 0,
                   std::numeric_limits<int32_t>::max());
    SecondsUpToAnHour("model.fake_delay_s", m.fake_delay_s);
    SecondsUpToAnHour("model.fake_load_s", m.fake_load_s);
    if (!(m.fake_temperature > 0 && m.fake_temperature <= 100)) {
      Error("model.fake_temperature",
            absl::StrCat(FormatDouble(m.fake_temperature),
                         " is outside (0, 100]"));
    }
    const EngineConfig& e = config_.engine;
    Range<int64_t>("engine.batch_tokens", e.batch_tokens, 1, int64_t{1} << 24);
    Range<int64_t>("engine.interactive_pass_tokens", e.interactive_pass_tokens,
                   0, int64_t{1} << 24);
    Range<int64_t>("engine.short_passes_after_interactive",
                   e.short_passes_after_interactive, 0, 64);
    Range<int64_t>("engine.kv_pool_bytes", e.kv_pool_bytes, 1,
                   int64_t{1} << 40);
    Range<int64_t>("engine.kv_block_tokens", e.kv_block_tokens, 1, 4096);
    Range<int64_t>("engine.host_cache_bytes", e.host_cache_bytes, 0,
                   int64_t{1} << 40);
    Range<int64_t>("engine.memory_reserve_bytes", e.memory_reserve_bytes, 0,
                   int64_t{1} << 40);
    Range<int64_t>("engine.cuda_graph_tokens", e.cuda_graph_tokens, 0, 4096);
    Range<int64_t>("engine.tenant_max_queued_calls", e.tenant_max_queued_calls,
                   0, 1 << 20);
    Range<int64_t>("engine.tenant_max_queued_tokens",
                   e.tenant_max_queued_tokens, 0, int64_t{1} << 40);
    Range<int64_t>("decisions.workers", config_.decisions.workers, 1, 256);
  }

  void CheckClient() {
    Positive("client.timeout_s", config_.client.timeout_s);
    if (config_.client.address.empty()) Error("client.address", "is empty");
    Range<int64_t>("client.affinity_bytes", config_.client.affinity_bytes, 0,
                   1 << 20);
    const BackendConfig& b = config_.backend;
    Positive("backend.timeout", b.timeout);
    Range<int64_t>("backend.workers", b.workers, 1, 256);
    Range<int64_t>("backend.logprobs", b.logprobs, 1, 1024);
    if (!b.health_path.empty() && b.health_path.front() != '/') {
      Error("backend.health_path", "must start with '/' (or be empty: auto)");
    }
    Range<int64_t>("backend.max_choice_k", b.max_choice_k, 2,
                   kMaxChoiceOptions);
    if (b.gateway_base_url.empty()) {
      Error("backend.gateway_base_url", "is empty");
    }
  }

  void CheckDeciderAndPolicy() {
    // A cyclic shift per option at most; a proposal is one choice question.
    Range<int64_t>("decider.max_permutations", config_.decider.max_permutations,
                   0, kMaxChoiceOptions);
    const PolicyConfig& p = config_.policy;
    Range<int64_t>("policy.max_candidates", p.max_candidates, 1, 1000);
    Range<int64_t>("policy.max_avus", p.max_avus, 1, 100000);
    Range<int64_t>("policy.proposal_size", p.proposal_size, 1,
                   kMaxChoiceOptions);
    if (!(p.specificity_delta >= 0.0 && p.specificity_delta <= 1.0)) {
      Error("policy.specificity_delta",
            absl::StrCat(FormatDouble(p.specificity_delta),
                         " is outside [0, 1]"));
    }
  }

  void CheckStores() {
    if (config_.artifacts.dir.empty()) Error("artifacts.dir", "is empty");
    const CompareConfig& c = config_.compare;
    for (const auto& [key, value] :
         {std::pair<absl::string_view, double>{"compare.max_flip", c.max_flip},
          {"compare.max_acc_diff", c.max_acc_diff}}) {
      if (!(value >= 0.0 && value <= 1.0)) {
        Error(key, absl::StrCat(FormatDouble(value), " is outside [0, 1]"));
      }
    }
    Range<int64_t>("compare.resamples", c.resamples, 1, 100000);
    Range<int64_t>("compare.seed", c.seed, 0,
                   std::numeric_limits<int32_t>::max());
    if (config_.labels.dir.empty()) Error("labels.dir", "is empty");
  }

  // Every limit is a positive count.
  void CheckLimit(const Field& field) {
    std::visit(
        [&](auto access) {
          using T = std::remove_reference_t<decltype(access(config_))>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            Range<int64_t>(field.key(), access(config_), 1,
                           std::numeric_limits<T>::max());
          }
        },
        field.access);
  }

  // Every enum holds one of its choices (a default edited in config.h is
  // checked too).
  void CheckEnum(const Field& field) {
    const std::string& value =
        std::get<Accessor<std::string>>(field.access)(config_);
    if (std::find(field.choices.begin(), field.choices.end(), value) ==
        field.choices.end()) {
      Error(field.key(), absl::StrCat(Quote(value), " is not one of ",
                                      absl::StrJoin(field.choices, ", ")));
    }
  }

  void Error(absl::string_view key, absl::string_view message) {
    const auto origin = origins_.find(key);
    errors_.push_back(
        absl::StrCat(key, ": ", message,
                     origin == origins_.end()
                         ? ""
                         : absl::StrCat(" (from ", origin->second, ")")));
  }

  template <typename T>
  void Range(absl::string_view key, T value, T lo, T hi) {
    if (value < lo || value > hi) {
      Error(key, absl::StrCat(value, " is out of range [", lo, ", ", hi, "]"));
    }
  }

  void Positive(absl::string_view key, double value) {
    if (!(value > 0)) {
      Error(key, absl::StrCat(FormatDouble(value), " must be > 0"));
    }
  }

  void NonNegative(absl::string_view key, double value) {
    if (value < 0) {
      Error(key, absl::StrCat(FormatDouble(value), " must be >= 0"));
    }
  }

  void SecondsUpToAnHour(absl::string_view key, double value) {
    if (!(value >= 0 && value <= 3600)) {
      Error(key,
            absl::StrCat(FormatDouble(value), " is out of range [0, 3600]"));
    }
  }

  void HostPort(absl::string_view key, const std::string& value) {
    const auto parsed = util::ParseHostPort(value);
    if (!parsed.ok()) Error(key, std::string(parsed.status().message()));
  }

  Config config_;  // a copy: the schema accessors take a mutable Config
  const std::map<std::string, std::string, std::less<>>& origins_;
  std::vector<std::string> errors_;
};

}  // namespace

absl::Status ValidateMerged(
    const Config& config,
    const std::map<std::string, std::string, std::less<>>& origins) {
  return Validator(config, origins).Run();
}

}  // namespace mesa_anyjev::config
