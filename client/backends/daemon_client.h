// The CLI's connection to mesa-anyjevd, in plain types: protobuf stays inside
// client/backends/. Every call carries the configured deadline and, when
// configured, the bearer token.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/backends/daemon_errors.h"
#include "client/backends/retry_rule.h"
#include "common/auth/tenant.h"
#include "common/backend.h"
#include "common/bundles/agreement_record.h"
#include "common/bundles/bundle_store.h"
#include "common/config/config.h"
#include "common/decision/decision.h"
#include "common/decision/level.h"
#include "common/decision/question.h"
#include "common/decision/running_priors.h"
#include "nlohmann/json.hpp"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace mesa_anyjev::client {

// The caller as the daemon sees its token (GetModelInfo's caller).
struct DaemonCaller {
  bool auth = false;    // false: auth off, every caller may do all
  auth::Tenant tenant;  // name "" when auth is off
  Priority priority = Priority::kInteractive;  // the class the call ran at
};

struct DaemonInfo {
  ModelIdentity identity;
  Capabilities capabilities;
  config::LimitsConfig limits;
  std::optional<DeviceInfo> device;  // a local model's device
  std::optional<int64_t>
      system_memory_available;         // the daemon host's MemAvailable
  std::optional<DaemonCaller> caller;  // none from a daemon before tenants
};

// The daemon's bundle store under one questions lock (Bundles.List).
struct RemoteBundles {
  std::string model;
  std::string dir;  // on the daemon's host
  std::vector<bundles::VersionEntry> versions;
  std::map<std::string, int> current;  // question id -> version
  std::string served_lock_sha;         // lock dir the daemon serves from
  std::string write_error;             // "" when a new version can be written
  // Questions with no CURRENT under this lock that an earlier lock's
  // CURRENT serves (lock, version, manifest; no artifacts).
  std::map<std::string, bundles::InheritedVersion> inherited;
  std::vector<bundles::StoredAgreement> agreements;
};

class DaemonClient {
 public:
  // Builds the channel (TLS when client.tls_ca is set) and reads the token;
  // does not connect yet.
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Create(
      const config::ClientConfig& config);

  // From now on the calls that change nothing on the daemon (Info,
  // Tokenize, Decide, FitDryRun, ResetPriors, ListBundles) are sent again
  // by `rule` (retry_rule.h); without one, each is one attempt, as a lone
  // command makes. Health (a probe) and the Bundles writes (a write sent
  // twice could store twice) are never retried.
  void EnableRetries(std::shared_ptr<const RetryRule> rule) {
    retry_ = std::move(rule);
  }

  // grpc.health.v1 Check of `service` ("" = the whole server): "SERVING",
  // "NOT_SERVING", ...; transport failures are errors.
  absl::StatusOr<std::string> Health(const std::string& service = "");
  absl::StatusOr<DaemonInfo> Info();
  // The daemon's tokenizer: ids of each text (no special tokens added).
  absl::StatusOr<std::vector<std::vector<TokenId>>> Tokenize(
      const std::vector<std::string>& texts);
  // Decide over rendered state texts: result[state][question]. `require`
  // makes the daemon refuse (FAILED_PRECONDITION) a question it would serve
  // below that level, before any work. With `scratch_artifacts` (a
  // heads/export file) a scratch decider holding only those serves the call.
  // With `carried` the batch priors are the caller's: the entries of the
  // questions asked travel with the call and come back updated into it.
  absl::StatusOr<std::vector<std::vector<decision::Decision>>> Decide(
      const std::vector<std::string>& states,
      const std::vector<decision::Question>& questions, decision::Level level,
      std::optional<decision::Level> require = std::nullopt,
      const nlohmann::ordered_json* scratch_artifacts = nullptr,
      decision::PriorTable* carried = nullptr);
  // Fit (docs/rpc.md) with dry_run: an L1 temperature or an L2 head fit in
  // a scratch decider of the daemon; returns its heads/export file, and
  // installs nothing.
  absl::StatusOr<nlohmann::ordered_json> FitDryRun(
      const decision::Question& question,
      const std::vector<std::string>& states, const std::vector<int>& labels,
      decision::Level level);
  // The Bundles service (docs/bundles.md), for the daemon's model under
  // the questions lock `lock_sha`. Errors carry the daemon's message as it
  // is (the CLI prints promote refusals verbatim). Under the CLI's own lock
  // each call carries the lock's questions, so the daemon knows the keys a
  // new lock keeps (Across question locks). Implemented in
  // daemon_bundles.cc.
  absl::StatusOr<RemoteBundles> ListBundles(const std::string& lock_sha);
  // One version, its files verified by the daemon.
  absl::StatusOr<bundles::BundleVersion> GetBundle(const std::string& lock_sha,
                                                   int version);
  // A new version (learn fit --backend hf); returns its number.
  absl::StatusOr<int> PutBundle(
      const std::string& lock_sha, const nlohmann::ordered_json& artifacts,
      const nlohmann::ordered_json& manifest_extra,
      const nlohmann::ordered_json* observations = nullptr);
  absl::StatusOr<bundles::PointerMove> PromoteBundle(
      const std::string& lock_sha, int version, const std::string& question_id,
      bool force);
  absl::StatusOr<bundles::PointerMove> RollbackBundle(
      const std::string& lock_sha, const std::string& question_id);
  // Keeps an agreement record beside the daemon's bundles; returns where.
  absl::StatusOr<std::string> PutAgreement(
      const std::string& lock_sha, const nlohmann::ordered_json& record);
  // Clears running batch priors (every key when `keys` is empty).
  absl::Status ResetPriors(const std::vector<std::string>& keys = {});
  const std::string& address() const { return endpoint_.address; }

 private:
  DaemonClient(std::shared_ptr<grpc::Channel> channel,
               std::optional<std::string> token, absl::Duration timeout,
               DaemonEndpoint endpoint, int32_t affinity_bytes,
               std::string priority);

  // A failed call in the user's terms (daemon_errors.h); `what` names the
  // call, "" keeps the daemon's message as it is. With `context`, the
  // daemon's retry pushback (its trailer) travels with the status.
  absl::Status Failed(const grpc::Status& status, std::string_view what,
                      const grpc::ClientContext* context = nullptr) const;

  // Deadline (now + client.timeout_s unless given), token, priority class
  // (client.priority, unless "default"), and the affinity key of the call's
  // first text.
  void Prepare(grpc::ClientContext& context, std::string_view first_text = "",
               std::optional<absl::Time> deadline = std::nullopt) const;

  // `attempt` on a fresh prepared context, sent again by the retry rule
  // when one is set; `attempt` stores its own result.
  absl::Status Call(
      std::string_view first_text,
      const std::function<absl::Status(grpc::ClientContext&)>& attempt) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::optional<std::string> token_;
  absl::Duration timeout_;
  DaemonEndpoint endpoint_;
  int32_t affinity_bytes_;
  std::string priority_;  // "" = ask none: the tenant's default
  std::shared_ptr<const RetryRule> retry_;
};

}  // namespace mesa_anyjev::client
