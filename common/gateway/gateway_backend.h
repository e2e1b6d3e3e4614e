// The gateway backend (docs/gateway.md): an OpenAI-compatible server
// (LiteLLM in front of vLLM) asked for next-token logprobs of each prompt
// over POST {base}/v1/completions. Where the server takes vLLM's
// logprob_token_ids, each label's exact logprob is asked for by id;
// elsewhere labels are looked up in the top-20 list, and a label outside it
// gets kMissingLogprob and is counted.
// Transport: libcurl, HTTPS with verification on (plain HTTP to loopback
// only), the API key sent as a bearer header to the configured origin only,
// 3 attempts with jittered backoff on 429/5xx/transport errors, a circuit
// breaker, and every wait bounded by the caller's deadline.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/gateway/circuit_breaker.h"
#include "common/gateway/completion_answer.h"
#include "common/gateway/completions_mapping.h"
#include "common/text/bpe_tokenizer.h"
#include "common/text/chat_template.h"

namespace mesa_anyjev::gateway {

struct HttpResult;  // http_exchange.h

// What a router's metrics hear from the gateway (docs/operations.md). Called
// from request threads; implementations must be thread-safe.
class GatewayObserver {
 public:
  virtual ~GatewayObserver() = default;
  // One HTTP attempt (or a refusal before one): `outcome` is ok, rejected
  // (4xx but 429), rate_limited (429), server_error (5xx), timeout,
  // transport, tls, bad_response, breaker_open or cancelled.
  virtual void OnGatewayAttempt(const char* outcome, absl::Duration took) = 0;
  virtual void OnGatewayRetry() = 0;
  virtual void OnGatewayMissingLabel() = 0;
  virtual void OnGatewayBreaker(bool open) = 0;
};

struct GatewayOptions {
  std::string base_url;         // https://host[:port][/prefix], not .../v1
  std::string served_model;     // "model" in the request body
  std::string canonical_model;  // identity().name
  std::string tokenizer;        // the served model's tokenizer.json (or dir)
  std::string api_key_env;      // name of the variable holding the key
  std::string api_key_file;     // or a 0600 file holding it
  std::string ca_file;          // PEM CA bundle for a private gateway
  // Optional public-key pin: "sha256//<base64>;sha256//..." or a PEM/DER
  // key file (CURLOPT_PINNEDPUBLICKEY); a mismatch fails before any data.
  std::string pinned_public_key;
  int32_t logprobs = 20;     // top-k asked for (at most the server's cap)
  int32_t max_choice_k = 8;  // the decision layer refuses wider choices
                             // (top-k readout; token_ids serves up to 26)
  std::string label_readout = "top_k";  // token_ids | top_k | auto (Connect)
  std::string health_path;   // "" = /health/liveliness, then /health on 404
  int32_t workers = 8;       // concurrent requests per Logprobs call
  double timeout_s = 120.0;  // per attempt, also bounded by the deadline
  double connect_timeout_s = 5.0;
  int32_t attempts = 3;          // tries per prompt (429, 5xx, transport)
  double backoff_base_s = 0.5;   // wait before retry n: base * 2^n, jittered
  int32_t breaker_failures = 3;  // consecutive failures that open it
  double breaker_open_s = 60.0;  // how long it stays open
  int64_t max_response_bytes = 8 << 20;
  GatewayObserver* observer = nullptr;  // not owned; may be null
};

// The reference's key variables: the native one wins over mesa-mcp's, so a
// host that runs both can give this CLI its own key.
inline constexpr char kNativeApiKeyVariable[] =
    "MESA_ANYJEV_BACKEND__GATEWAY_API_KEY";
inline constexpr char kMesaMcpApiKeyVariable[] = "MESA_LLM_API_KEY";

// The gateway options of config section `backend` (the rest keep their
// defaults). Without backend.gateway_api_key_env/_file the key comes from
// DefaultApiKeyVariable().
GatewayOptions GatewayOptionsFromConfig(const config::BackendConfig& config);

// The first of kNativeApiKeyVariable, kMesaMcpApiKeyVariable that is set and
// non-empty, else "".
std::string DefaultApiKeyVariable();

// The wait before retry `attempt` (0-based): base * 2^attempt scaled by
// 0.75 + 0.5 * u for u in [0, 1) (jitter of +-25%).
absl::Duration BackoffDelay(int32_t attempt, double base_s, double u);

// Whether an HTTP answer is worth another attempt: 429 and 5xx.
bool IsRetryableHttpStatus(int64_t http_status);

// The status for a non-2xx HTTP answer (docs/gateway.md, Status mapping):
// 400/422
// INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
// NOT_FOUND, 408/504 DEADLINE_EXCEEDED, 429 RESOURCE_EXHAUSTED, 502/503
// UNAVAILABLE, other 5xx UNAVAILABLE, anything else UNKNOWN. `body` (first
// 300 bytes) goes in the message.
absl::Status HttpStatusToStatus(int64_t http_status, const std::string& body);

// The widest choice the token_ids readout serves: every letter label.
inline constexpr int32_t kTokenIdsMaxChoiceK = kMaxChoiceOptions;

class GatewayBackend : public Backend {
 public:
  // Validates the URL (http only to 127.0.0.1, localhost or ::1; no
  // trailing /v1), loads the key and the tokenizer. Errors are
  // INVALID_ARGUMENT / NOT_FOUND naming what is wrong (never the key).
  static absl::StatusOr<std::unique_ptr<GatewayBackend>> Create(
      const GatewayOptions& options);
  ~GatewayBackend() override;
  // Create, then for label_readout "auto" one probe completion naming two
  // label ids: token_ids where the server answers them by id, else top_k.
  // A probe that fails in transport keeps top_k and says so in `note`.
  static absl::StatusOr<std::unique_ptr<GatewayBackend>> Connect(
      const GatewayOptions& options, const CallControl& control,
      std::string* note = nullptr);
  LabelReadout label_readout() const { return readout_; }

  const ModelIdentity& identity() const override { return identity_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  const text::Tokenizer& tokenizer() const override { return *tokenizer_; }
  const text::ChatTemplate& chat_template() const override {
    return chat_template_;
  }

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override;

  // The gateway serves no hidden states: FAILED_PRECONDITION.
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;

  // GET the liveness route (the reference probe's first step): health_path,
  // or /health/liveliness (LiteLLM) and on a 404 /health (vLLM). One
  // attempt each, bounded by the deadline, outside the breaker. OK on HTTP
  // 200; `answered` receives the path that answered.
  absl::Status Liveness(const CallControl& control);
  // The same before a backend exists (no key, no tokenizer needed): the
  // doctor's order checks liveness first.
  static absl::Status CheckLiveness(const GatewayOptions& options,
                                    const CallControl& control,
                                    std::string* answered = nullptr);
  // The base URL rules (https, or http to loopback; no trailing /v1): the
  // URL with trailing slashes removed, or INVALID_ARGUMENT saying why.
  static absl::StatusOr<std::string> ValidateBaseUrl(
      const GatewayOptions& options);
  // One completion asking for `logprobs` top entries: OK when the gateway
  // accepts it, else its error (a 400 is INVALID_ARGUMENT with the body).
  absl::Status CheckLogprobsCap(int32_t logprobs, const CallControl& control);

  int64_t missing_label_events() const { return missing_label_events_.load(); }
  int64_t requests() const { return requests_.load(); }
  const std::string& base_url() const { return base_url_; }

 private:
  GatewayBackend(const GatewayOptions& options, std::string base_url,
                 std::optional<std::string> api_key,
                 std::unique_ptr<text::BpeTokenizer> tokenizer,
                 text::ChatTemplate chat_template);

  // One prompt: request with retries, parse, read the labels and top list.
  absl::StatusOr<PromptLogprobs> One(const std::vector<TokenId>& prompt_ids,
                                     const std::vector<TokenId>& label_ids,
                                     int32_t top_k, const CallControl& control);
  // The token_ids readout, with the widest choice it serves.
  void UseTokenIds();
  // Counts a label the answer did not hold, and reports it.
  void MissingLabel();
  // Reports one attempt's outcome to the observer, if any.
  void Observe(const char* outcome, absl::Duration took) const;
  // Counts a failure in the breaker and reports its state.
  void Failure();
  // POST with retries and the breaker; the parsed top_logprobs[0] map.
  absl::StatusOr<std::map<std::string, double>> Post(
      const std::string& body, const CallControl& control);
  // One attempt's outcome: the parsed map, a final error, or (retry) an
  // error worth another attempt.
  struct Attempt {
    absl::StatusOr<std::map<std::string, double>> answer;
    bool retry = false;
  };
  // Judges one attempt (reports it, counts it in the breaker).
  Attempt Judge(const HttpResult& result, absl::Duration took,
                bool limited_by_deadline, int32_t attempt, uint64_t probe);
  Attempt JudgeTransport(int curl_code, absl::Duration took);
  Attempt JudgeRefusal(const HttpResult& result, absl::Duration took,
                       uint64_t probe);
  // The wait before the next attempt (backoff or Retry-After), woken by a
  // cancel; an error when the deadline leaves no time or the caller left.
  absl::Status Backoff(int32_t attempt, int64_t retry_after_s,
                       const absl::Status& last,
                       const CallControl& control) const;

  const GatewayOptions options_;
  const std::string base_url_;
  const std::optional<std::string> api_key_;
  std::unique_ptr<text::BpeTokenizer> tokenizer_;
  text::ChatTemplate chat_template_;
  ModelIdentity identity_;
  Capabilities capabilities_;
  LabelReadout readout_ = LabelReadout::kTopK;  // set before any call
  CircuitBreaker breaker_;
  std::atomic<int64_t> missing_label_events_{0};
  std::atomic<int64_t> requests_{0};
};

}  // namespace mesa_anyjev::gateway
