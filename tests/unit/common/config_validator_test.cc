// The merged-config rules as one message: every rule that fails is named, in
// the order the validator checks them, with the origin of the value where one
// is known. The whole text is pinned: the daemon and the CLI print it as is.
#include "common/config/config_validator.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/config/config.h"

namespace mesa_anyjev::config {
namespace {

using Origins = std::map<std::string, std::string, std::less<>>;

std::string Message(const Config& config, const Origins& origins = {}) {
  const absl::Status status = ValidateMerged(config, origins);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST_CASE("config validator: defaults pass", "[config]") {
  CHECK(ValidateMerged(Config{}, {}).ok());
}

TEST_CASE("config validator: every rule broken at once, in order", "[config]") {
  Config c;
  c.server.listen = "nowhere";
  c.server.metrics_listen = "9464";
  c.server.queue_capacity = 0;
  c.server.default_deadline_s = 0;
  c.server.max_deadline_s = -1;
  c.server.drain_deadline_s = -1;
  c.server.drain_grace_s = -2;
  c.server.max_receive_message_bytes = 1023;
  c.server.max_send_message_bytes = int64_t{1} << 31;
  c.server.max_concurrent_streams = 0;
  c.server.tls_cert = "/c.pem";
  c.model.path = "";
  c.model.device = "gpu";
  c.model.threads = -1;
  c.model.fake_delay_s = 3601;
  c.model.fake_load_s = -0.5;
  c.engine.batch_tokens = 0;
  c.engine.kv_pool_bytes = 0;
  c.engine.kv_block_tokens = 4097;
  c.engine.host_cache_bytes = -1;
  c.engine.memory_reserve_bytes = -1;
  c.decisions.workers = 257;
  c.client.timeout_s = 0;
  c.client.address = "";
  c.client.affinity_bytes = -1;
  c.backend.timeout = -3;
  c.backend.workers = 0;
  c.backend.logprobs = 1025;
  c.backend.health_path = "health";
  c.backend.max_choice_k = 1;
  c.backend.gateway_base_url = "";
  c.decider.max_permutations = 27;
  c.policy.max_candidates = 0;
  c.policy.max_avus = 0;
  c.policy.proposal_size = 27;
  c.policy.specificity_delta = 1.5;
  c.artifacts.dir = "";
  c.labels.dir = "";
  c.limits.max_groups = 0;
  c.limits.max_bundle_bytes = 0;
  c.log.level = "loud";
  c.decider.level = "L9";
  const Origins origins = {{"server.queue_capacity", "flag --queue"},
                           {"model.device", "environment MODEL"},
                           {"log.level", "c.yaml, line 2"}};
  CHECK(Message(c, origins) ==
        "config: "
        "server.listen: 'nowhere' is not host:port (has no ':port'); "
        "server.metrics_listen: '9464' is not host:port (has no ':port'); "
        "server.queue_capacity: 0 is out of range [1, 100000] "
        "(from flag --queue); "
        "server.default_deadline_s: 0.0 must be > 0; "
        "server.max_deadline_s: -1.0 must be > 0; "
        "server.default_deadline_s: 0.0 must be <= server.max_deadline_s "
        "(-1.0); "
        "server.drain_deadline_s: -1.0 must be >= 0; "
        "server.drain_grace_s: -2.0 must be >= 0; "
        "server.max_receive_message_bytes: 1023 is out of range "
        "[1024, 2147483647]; "
        "server.max_send_message_bytes: 2147483648 is out of range "
        "[1024, 2147483647]; "
        "server.max_concurrent_streams: 0 is out of range [1, 2147483647]; "
        "server.tls_cert: is set but server.tls_key is empty; TLS needs both "
        "or neither; "
        "model.path: is empty (a checkpoint directory or \"fake\"); "
        "model.device: 'gpu' is not cpu, cuda or cuda:N "
        "(from environment MODEL); "
        "model.threads: -1 is out of range [0, 2147483647]; "
        "model.fake_delay_s: 3601.0 is out of range [0, 3600]; "
        "model.fake_load_s: -0.5 is out of range [0, 3600]; "
        "engine.batch_tokens: 0 is out of range [1, 16777216]; "
        "engine.kv_pool_bytes: 0 is out of range [1, 1099511627776]; "
        "engine.kv_block_tokens: 4097 is out of range [1, 4096]; "
        "engine.host_cache_bytes: -1 is out of range [0, 1099511627776]; "
        "engine.memory_reserve_bytes: -1 is out of range "
        "[0, 1099511627776]; "
        "decisions.workers: 257 is out of range [1, 256]; "
        "client.timeout_s: 0.0 must be > 0; "
        "client.address: is empty; "
        "client.affinity_bytes: -1 is out of range [0, 1048576]; "
        "backend.timeout: -3.0 must be > 0; "
        "backend.workers: 0 is out of range [1, 256]; "
        "backend.logprobs: 1025 is out of range [1, 1024]; "
        "backend.health_path: must start with '/' (or be empty: auto); "
        "backend.max_choice_k: 1 is out of range [2, 26]; "
        "backend.gateway_base_url: is empty; "
        "decider.max_permutations: 27 is out of range [0, 26]; "
        "policy.max_candidates: 0 is out of range [1, 1000]; "
        "policy.max_avus: 0 is out of range [1, 100000]; "
        "policy.proposal_size: 27 is out of range [1, 26]; "
        "policy.specificity_delta: 1.5 is outside [0, 1]; "
        "artifacts.dir: is empty; "
        "labels.dir: is empty; "
        "limits.max_groups: 0 is out of range [1, 2147483647]; "
        "limits.max_bundle_bytes: 0 is out of range "
        "[1, 9223372036854775807]; "
        "decider.level: 'L9' is not one of raw, L0, L1, L2, auto; "
        "log.level: 'loud' is not one of trace, debug, info, warn, error "
        "(from c.yaml, line 2)");
}

TEST_CASE("config validator: the rules between keys", "[config]") {
  Config c;
  c.server.metrics_listen = "";  // off: not parsed
  c.server.default_deadline_s = 121;
  c.server.tls_key = "/k.pem";
  c.backend.health_path = "/ready";
  CHECK(Message(c, {{"server.default_deadline_s", "flag --deadline"}}) ==
        "config: server.default_deadline_s: 121.0 must be <= "
        "server.max_deadline_s (120.0) (from flag --deadline); "
        "server.tls_key: is set but server.tls_cert is empty; TLS needs both "
        "or neither");
}

}  // namespace
}  // namespace mesa_anyjev::config
