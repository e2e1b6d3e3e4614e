// The gateway backend: see gateway_backend.h and docs/gateway.md.
#include "common/gateway/gateway_backend.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/gateway/http_exchange.h"
#include "common/status/status_macros.h"
#include "common/util/secret.h"

namespace mesa_anyjev::gateway {
namespace {

constexpr size_t kBodyExcerpt = 300;
// How often a backoff sleep looks at the caller's cancel flag.
constexpr absl::Duration kBackoffPoll = absl::Milliseconds(10);

bool IsLoopbackHost(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" ||
         host == "[::1]";
}

double UniformJitter() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

// GET one liveness path once, bounded by the deadline.
absl::Status GetLive(const GatewayOptions& options, const std::string& base,
                     const std::optional<std::string>& api_key,
                     const std::string& path, const CallControl& control,
                     int64_t* http_status) {
  const absl::Time now = absl::Now();
  if (now >= control.deadline) {
    return absl::DeadlineExceededError(
        "deadline passed before the liveness check");
  }
  const absl::Duration limit =
      std::min(absl::Seconds(options.timeout_s), control.deadline - now);
  const HttpResult result =
      Perform(options, api_key, absl::StrCat(base, path), /*post_body=*/nullptr,
              std::max<int64_t>(1, absl::ToInt64Milliseconds(limit)), control);
  *http_status = result.http_status;
  if (result.code == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError("gateway liveness: timed out");
  }
  if (result.code != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat("gateway liveness: ", curl_easy_strerror(result.code)));
  }
  if (result.http_status != 200) {
    return HttpStatusToStatus(result.http_status, result.body);
  }
  return absl::OkStatus();
}

// The configured path, or LiteLLM's route and then vLLM's: which one a
// server answers says what it is.
absl::Status LivenessOf(const GatewayOptions& options, const std::string& base,
                        const std::optional<std::string>& api_key,
                        const CallControl& control, std::string* answered) {
  std::vector<std::string> paths = {options.health_path};
  if (options.health_path.empty()) paths = {"/health/liveliness", "/health"};
  absl::Status status;
  for (const std::string& path : paths) {
    int64_t http_status = 0;
    status = GetLive(options, base, api_key, path, control, &http_status);
    if (answered != nullptr) *answered = path;
    if (http_status != 404) break;
  }
  return status;
}

// The options Create checks before it loads anything (the URL apart).
absl::Status CheckOptions(const GatewayOptions& options) {
  if (options.served_model.empty()) {
    return absl::InvalidArgumentError("gateway served_model is empty");
  }
  if (options.label_readout != "top_k" &&
      options.label_readout != "token_ids") {
    return absl::InvalidArgumentError(
        absl::StrCat("gateway label_readout '", options.label_readout,
                     "' (Create takes token_ids or top_k; Connect also auto)"));
  }
  if (options.workers < 1 || options.attempts < 1 ||
      options.breaker_failures < 1 || options.logprobs < 1 ||
      !(options.timeout_s > 0) || !(options.connect_timeout_s > 0)) {
    return absl::InvalidArgumentError(
        "gateway workers, attempts, breaker_failures, logprobs and timeouts "
        "must be positive");
  }
  if (!options.ca_file.empty() && !std::filesystem::exists(options.ca_file)) {
    return absl::NotFoundError(
        absl::StrCat("gateway ca_file ", options.ca_file, " does not exist"));
  }
  return absl::OkStatus();
}

// The chat template beside the tokenizer: tokenizer_config.json in the
// directory that holds (or is) `tokenizer`.
absl::StatusOr<text::ChatTemplate> ChatTemplateBeside(
    const std::string& tokenizer) {
  std::filesystem::path dir(tokenizer);
  if (!std::filesystem::is_directory(dir)) dir = dir.parent_path();
  return text::ChatTemplate::FromFile((dir / "tokenizer_config.json").string());
}

}  // namespace

GatewayOptions GatewayOptionsFromConfig(const config::BackendConfig& config) {
  GatewayOptions options;
  options.base_url = config.gateway_base_url;
  options.served_model = config.served_model;
  options.canonical_model = config.canonical_model;
  options.tokenizer = config.tokenizer;
  options.api_key_env = config.gateway_api_key_env;
  options.api_key_file = config.gateway_api_key_file;
  if (options.api_key_env.empty() && options.api_key_file.empty()) {
    options.api_key_env = DefaultApiKeyVariable();
  }
  options.ca_file = config.ca_file;
  options.pinned_public_key = config.pinned_public_key;
  options.logprobs = config.logprobs;
  options.max_choice_k = config.max_choice_k;
  options.label_readout = config.label_readout;
  options.health_path = config.health_path;
  options.workers = config.workers;
  options.timeout_s = config.timeout;
  return options;
}

std::string DefaultApiKeyVariable() {
  for (const char* name : {kNativeApiKeyVariable, kMesaMcpApiKeyVariable}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return name;
  }
  return "";
}

absl::Duration BackoffDelay(int32_t attempt, double base_s, double u) {
  const double scale = 0.75 + 0.5 * std::clamp(u, 0.0, 1.0);
  return absl::Seconds(base_s * std::ldexp(1.0, attempt) * scale);
}

bool IsRetryableHttpStatus(int64_t http_status) {
  return http_status == 429 || (http_status >= 500 && http_status <= 599);
}

absl::Status HttpStatusToStatus(int64_t http_status, const std::string& body) {
  const std::string message =
      absl::StrCat("gateway answered HTTP ", http_status, ": ",
                   body.substr(0, std::min(body.size(), kBodyExcerpt)));
  switch (http_status) {
    case 400:
    case 422:
      return absl::InvalidArgumentError(
          absl::StrCat("gateway rejected the request: ", message));
    case 401:
      return absl::UnauthenticatedError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 408:
    case 504:
      return absl::DeadlineExceededError(message);
    case 429:
      return absl::ResourceExhaustedError(message);
    default:
      break;
  }
  if (http_status >= 500 && http_status <= 599) {
    return absl::UnavailableError(message);
  }
  return absl::UnknownError(message);
}

absl::StatusOr<std::string> GatewayBackend::ValidateBaseUrl(
    const GatewayOptions& options) {
  std::string scheme, host, path;
  if (absl::Status status = ParseUrl(options.base_url, &scheme, &host, &path);
      !status.ok()) {
    return status;
  }
  if (scheme != "https" && scheme != "http") {
    return absl::InvalidArgumentError(
        absl::StrCat("gateway base_url '", options.base_url,
                     "' must be https:// (or "
                     "http:// to a loopback host)"));
  }
  if (scheme == "http" && !IsLoopbackHost(host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gateway base_url '", options.base_url,
        "': plain http is allowed only to a loopback host (127.0.0.1, "
        "localhost, ::1); use https://"));
  }
  std::string base = options.base_url;
  while (absl::EndsWith(base, "/")) base.pop_back();
  std::string trimmed_path = path;
  while (absl::EndsWith(trimmed_path, "/")) trimmed_path.pop_back();
  if (absl::EndsWith(trimmed_path, "/v1")) {
    return absl::InvalidArgumentError(
        "gateway_base_url must not end in /v1 (the backend appends "
        "/v1/completions)");
  }
  return base;
}

absl::StatusOr<std::unique_ptr<GatewayBackend>> GatewayBackend::Create(
    const GatewayOptions& options) {
  CurlGlobalInit();
  ASSIGN_OR_RETURN(std::string base, ValidateBaseUrl(options));
  RETURN_IF_ERROR(CheckOptions(options));
  ASSIGN_OR_RETURN(std::optional<std::string> key,
                   util::LoadSecret(options.api_key_env, options.api_key_file,
                                    "gateway API key"));
  if (options.tokenizer.empty()) {
    return absl::InvalidArgumentError(
        "gateway tokenizer is empty (the served model's tokenizer.json)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<text::BpeTokenizer> tokenizer,
                   text::BpeTokenizer::FromFile(options.tokenizer));
  ASSIGN_OR_RETURN(text::ChatTemplate chat,
                   ChatTemplateBeside(options.tokenizer));
  return std::unique_ptr<GatewayBackend>(
      new GatewayBackend(options, std::move(base), std::move(key),
                         std::move(tokenizer), std::move(chat)));
}

GatewayBackend::GatewayBackend(const GatewayOptions& options,
                               std::string base_url,
                               std::optional<std::string> api_key,
                               std::unique_ptr<text::BpeTokenizer> tokenizer,
                               text::ChatTemplate chat_template)
    : options_(options),
      base_url_(std::move(base_url)),
      api_key_(std::move(api_key)),
      tokenizer_(std::move(tokenizer)),
      chat_template_(chat_template),
      breaker_(options.breaker_failures,
               absl::Seconds(options.breaker_open_s)) {
  identity_.name = options.canonical_model.empty() ? options.served_model
                                                   : options.canonical_model;
  identity_.device = "gateway";
  capabilities_.hidden_states = false;
  capabilities_.early_stop = false;
  capabilities_.max_choice_k = options.max_choice_k;
  capabilities_.logprob_top_k = options.logprobs;
  capabilities_.vocab_size = tokenizer_->vocab_size();
  if (options.label_readout == "token_ids") UseTokenIds();
}

GatewayBackend::~GatewayBackend() = default;

absl::StatusOr<HiddenStatesResult> GatewayBackend::HiddenStates(
    const std::vector<PromptGroup>&, const std::vector<int32_t>&,
    const CallControl&) {
  return absl::FailedPreconditionError("the gateway serves no hidden states");
}

absl::StatusOr<std::map<std::string, double>> GatewayBackend::Post(
    const std::string& body, const CallControl& control) {
  const std::string url = absl::StrCat(base_url_, "/v1/completions");
  absl::Status last = absl::UnavailableError("gateway: no attempt made");
  uint64_t probe = 0;  // this call's half-open probe, if it is one
  absl::Cleanup release = [&] { breaker_.Release(probe); };
  for (int32_t attempt = 0; attempt < options_.attempts; ++attempt) {
    const absl::Time now = absl::Now();
    if (control.cancelled != nullptr && control.cancelled->load()) {
      return absl::CancelledError("gateway call cancelled");
    }
    if (now >= control.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "deadline passed before gateway attempt ", attempt + 1,
          attempt > 0 ? absl::StrCat(" (last error: ", last.message(), ")")
                      : std::string()));
    }
    auto admitted = breaker_.Check(now);
    if (!admitted.ok()) {
      Observe("breaker_open", absl::ZeroDuration());
      return admitted.status();
    }
    // This attempt is the half-open probe: its outcome closes or reopens
    // the breaker; an attempt that ends without one (cancelled, deadline)
    // hands the probe to the next caller.
    probe = *admitted;

    // Per attempt: the configured timeout, cut to the caller's deadline.
    const absl::Duration to_deadline = control.deadline - now;
    const absl::Duration limit =
        std::min(absl::Seconds(options_.timeout_s), to_deadline);
    const int64_t limit_ms = std::max<int64_t>(
        1, absl::ToInt64Milliseconds(limit + absl::Milliseconds(1) -
                                     absl::Nanoseconds(1)));
    const HttpResult result =
        Perform(options_, api_key_, url, &body, limit_ms, control);
    Attempt judged =
        Judge(result, absl::Now() - now,
              /*limited_by_deadline=*/to_deadline <= limit, attempt, probe);
    if (!judged.retry) return std::move(judged.answer);

    last = judged.answer.status();
    Failure();
    if (attempt + 1 >= options_.attempts) break;
    RETURN_IF_ERROR(Backoff(attempt, result.retry_after_s, last, control));
    if (options_.observer != nullptr) options_.observer->OnGatewayRetry();
  }
  return absl::Status(
      last.code(), absl::StrCat("gateway unreachable after ", options_.attempts,
                                " attempts: ", last.message()));
}

GatewayBackend::Attempt GatewayBackend::Judge(const HttpResult& result,
                                              absl::Duration took,
                                              bool limited_by_deadline,
                                              int32_t attempt, uint64_t probe) {
  if (result.code == CURLE_ABORTED_BY_CALLBACK) {
    Observe("cancelled", took);
    return {absl::CancelledError("gateway call cancelled")};
  }
  if (result.code == CURLE_OPERATION_TIMEDOUT && limited_by_deadline) {
    Observe("timeout", took);
    Failure();
    return {absl::DeadlineExceededError(
        absl::StrCat("gateway did not answer before the deadline (attempt ",
                     attempt + 1, ")"))};
  }
  if (result.too_big) {
    Observe("bad_response", took);
    Failure();
    return {absl::ResourceExhaustedError(
        absl::StrCat("gateway response larger than ",
                     options_.max_response_bytes, " bytes"))};
  }
  if (result.code != CURLE_OK) return JudgeTransport(result.code, took);
  if (result.http_status < 200 || result.http_status > 299) {
    return JudgeRefusal(result, took, probe);
  }
  auto top = ParseTopLogprobs(result.body);
  if (!top.ok()) {
    Observe("bad_response", took);
    Failure();
    return {top.status()};
  }
  Observe("ok", took);
  breaker_.Success();
  if (options_.observer != nullptr) options_.observer->OnGatewayBreaker(false);
  requests_.fetch_add(1);
  return {*std::move(top)};
}

GatewayBackend::Attempt GatewayBackend::JudgeTransport(int code,
                                                       absl::Duration took) {
  const auto curl_code = static_cast<CURLcode>(code);
  const std::string what = curl_easy_strerror(curl_code);
  if (curl_code == CURLE_OPERATION_TIMEDOUT) {
    Observe("timeout", took);
    return {
        absl::DeadlineExceededError(absl::StrCat("gateway transport: ", what)),
        /*retry=*/true};
  }
  if (curl_code == CURLE_SSL_PINNEDPUBKEYNOTMATCH) {
    Observe("tls", took);
    Failure();
    return {absl::UnavailableError(absl::StrCat(
        "gateway public key does not match the configured pin for ",
        base_url_))};
  }
  if (curl_code == CURLE_PEER_FAILED_VERIFICATION ||
      curl_code == CURLE_SSL_CACERT_BADFILE ||
      curl_code == CURLE_SSL_CONNECT_ERROR) {
    // A certificate that does not verify fails closed, not retried.
    Observe("tls", took);
    Failure();
    return {absl::UnavailableError(absl::StrCat(
        "gateway TLS verification failed for ", base_url_, ": ", what))};
  }
  Observe("transport", took);
  return {absl::UnavailableError(absl::StrCat("gateway transport: ", what)),
          /*retry=*/true};
}

GatewayBackend::Attempt GatewayBackend::JudgeRefusal(const HttpResult& result,
                                                     absl::Duration took,
                                                     uint64_t probe) {
  Observe(result.http_status == 429   ? "rate_limited"
          : result.http_status >= 500 ? "server_error"
                                      : "rejected",
          took);
  const absl::Status refused =
      HttpStatusToStatus(result.http_status, result.body);
  if (IsRetryableHttpStatus(result.http_status)) return {refused, true};
  // A refused request (400, 401, 404, 422) says nothing about the gateway's
  // health; only a server error counts toward the breaker.
  if (result.http_status >= 500) {
    Failure();
  } else {
    breaker_.Release(probe);
  }
  return {refused};
}

absl::Status GatewayBackend::Backoff(int32_t attempt, int64_t retry_after_s,
                                     const absl::Status& last,
                                     const CallControl& control) const {
  // A Retry-After (429, 503) lengthens the wait, never past the deadline.
  const absl::Duration wait =
      std::max(BackoffDelay(attempt, options_.backoff_base_s, UniformJitter()),
               absl::Seconds(std::max<int64_t>(0, retry_after_s)));
  if (absl::Now() + wait >= control.deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the deadline leaves no time to retry the gateway (last error: ",
        last.message(), ")"));
  }
  // Wakes for a cancelled caller; the deadline was checked above.
  for (const absl::Time end = absl::Now() + wait; absl::Now() < end;) {
    if (control.cancelled != nullptr && control.cancelled->load()) {
      return absl::CancelledError("gateway call cancelled during backoff");
    }
    absl::SleepFor(std::min(kBackoffPoll, end - absl::Now()));
  }
  return absl::OkStatus();
}

void GatewayBackend::Observe(const char* outcome, absl::Duration took) const {
  if (options_.observer != nullptr) {
    options_.observer->OnGatewayAttempt(outcome, took);
  }
}

void GatewayBackend::Failure() {
  const absl::Time now = absl::Now();
  breaker_.Failure(now);
  if (options_.observer != nullptr) {
    options_.observer->OnGatewayBreaker(breaker_.open(now));
  }
}

absl::Status GatewayBackend::Liveness(const CallControl& control) {
  return LivenessOf(options_, base_url_, api_key_, control, nullptr);
}

absl::Status GatewayBackend::CheckLiveness(const GatewayOptions& options,
                                           const CallControl& control,
                                           std::string* answered) {
  CurlGlobalInit();
  ASSIGN_OR_RETURN(const std::string base, ValidateBaseUrl(options));
  return LivenessOf(options, base, std::nullopt, control, answered);
}

absl::StatusOr<std::unique_ptr<GatewayBackend>> GatewayBackend::Connect(
    const GatewayOptions& options, const CallControl& control,
    std::string* note) {
  GatewayOptions fixed = options;
  if (fixed.label_readout == "auto") fixed.label_readout = "top_k";
  ASSIGN_OR_RETURN(std::unique_ptr<GatewayBackend> backend, Create(fixed));
  if (options.label_readout != "auto") return backend;
  const TokenId yes = backend->tokenizer_->TokenToId("Yes");
  const TokenId no = backend->tokenizer_->TokenToId("No");
  const auto answer =
      backend->Post(TokenIdsProbe(options.served_model, yes, no), control);
  if (answer.ok() && answer->contains(TokenIdKey(yes)) &&
      answer->contains(TokenIdKey(no))) {
    backend->UseTokenIds();
    if (note != nullptr) *note = "token_ids (the server answers label ids)";
  } else if (note != nullptr) {
    *note =
        answer.ok() ? "top_k (the server ignored logprob_token_ids)"
        : absl::IsInvalidArgument(answer.status())
            ? "top_k (the server refuses logprob_token_ids)"
            : absl::StrCat(
                  "top_k (the probe failed: ", answer.status().message(), ")");
  }
  return backend;
}

void GatewayBackend::UseTokenIds() {
  readout_ = LabelReadout::kTokenIds;
  capabilities_.max_choice_k =
      std::max(options_.max_choice_k, kTokenIdsMaxChoiceK);
}

absl::Status GatewayBackend::CheckLogprobsCap(int32_t logprobs,
                                              const CallControl& control) {
  return Post(CompletionRequest(options_.served_model, kProbePrompt, logprobs),
              control)
      .status();
}

absl::StatusOr<PromptLogprobs> GatewayBackend::One(
    const std::vector<TokenId>& prompt_ids,
    const std::vector<TokenId>& label_ids, int32_t top_k,
    const CallControl& control) {
  ASSIGN_OR_RETURN(const std::string prompt, tokenizer_->Decode(prompt_ids));
  ASSIGN_OR_RETURN(
      const auto top,
      Post(LabelRequest(options_.served_model, prompt, options_.logprobs,
                        readout_, label_ids, top_k),
           control));
  PromptLogprobs out;
  out.n_tokens = static_cast<int32_t>(prompt_ids.size());
  out.label_logprobs.reserve(label_ids.size());
  for (const std::optional<double>& value :
       LabelLogprobs(top, label_ids, readout_, *tokenizer_)) {
    if (!value.has_value()) MissingLabel();
    out.label_logprobs.push_back(value.value_or(kMissingLogprob));
  }
  if (top_k > 0) out.top = TopTokens(top, top_k, readout_, *tokenizer_);
  return out;
}

void GatewayBackend::MissingLabel() {
  missing_label_events_.fetch_add(1);
  if (options_.observer != nullptr) options_.observer->OnGatewayMissingLabel();
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>>
GatewayBackend::Logprobs(const std::vector<PromptGroup>& groups, int32_t top_k,
                         const CallControl& control) {
  struct Job {
    size_t group;
    size_t suffix;
  };
  std::vector<Job> jobs;
  std::vector<std::vector<PromptLogprobs>> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    out[g].resize(groups[g].suffixes.size());
    for (size_t s = 0; s < groups[g].suffixes.size(); ++s) {
      jobs.push_back({g, s});
    }
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  absl::Status first_error;
  auto work = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= jobs.size()) return;
      const PromptGroup& group = groups[jobs[i].group];
      std::vector<TokenId> ids = group.prefix;
      const std::vector<TokenId>& suffix = group.suffixes[jobs[i].suffix];
      ids.insert(ids.end(), suffix.begin(), suffix.end());
      absl::StatusOr<PromptLogprobs> one =
          One(ids, group.label_ids, top_k, control);
      if (!one.ok()) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (first_error.ok()) first_error = one.status();
        failed.store(true);
        return;
      }
      out[jobs[i].group][jobs[i].suffix] = *std::move(one);
    }
  };
  const size_t n_threads = std::min<size_t>(
      jobs.size(), static_cast<size_t>(std::max(1, options_.workers)));
  std::vector<std::thread> threads;
  threads.reserve(n_threads > 0 ? n_threads - 1 : 0);
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  if (n_threads > 0) work();
  for (std::thread& thread : threads) thread.join();
  if (!first_error.ok()) return first_error;
  return out;
}

}  // namespace mesa_anyjev::gateway
