// gateway_tool: a test tool for tests/e2e/test_gateway.py. Reads one JSON
// object on stdin: {"options": {GatewayOptions fields}, "calls": [{"prefix":
// text, "prompts": [text...], "labels": [text...], "deadline_ms": n,
// "top_k": n, "sleep_ms": n, "cancel_after_attempt": true}]}, builds a
// GatewayBackend and writes one JSON line per call:
// {"code", "message", "elapsed_ms", "label_logprobs": [[...]], "top":
// [[[id, logprob]...]], "missing_label_events", "requests"}, after a line of
// capabilities and, with "liveness": true, one {"liveness": code}. A refused
// construction writes {"create_code", "message"} and exits 2.
#include <atomic>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/gateway/gateway_backend.h"

namespace {

using mesa_anyjev::CallControl;
using mesa_anyjev::PromptGroup;
using mesa_anyjev::gateway::GatewayBackend;
using mesa_anyjev::gateway::GatewayOptions;

GatewayOptions ReadOptions(const nlohmann::json& j) {
  GatewayOptions o;
  o.base_url = j.value("base_url", o.base_url);
  o.served_model = j.value("served_model", o.served_model);
  o.canonical_model = j.value("canonical_model", o.canonical_model);
  o.tokenizer = j.value("tokenizer", o.tokenizer);
  o.api_key_env = j.value("api_key_env", o.api_key_env);
  o.api_key_file = j.value("api_key_file", o.api_key_file);
  o.ca_file = j.value("ca_file", o.ca_file);
  o.pinned_public_key = j.value("pinned_public_key", o.pinned_public_key);
  o.logprobs = j.value("logprobs", o.logprobs);
  o.max_choice_k = j.value("max_choice_k", o.max_choice_k);
  o.workers = j.value("workers", o.workers);
  o.timeout_s = j.value("timeout_s", o.timeout_s);
  o.attempts = j.value("attempts", o.attempts);
  o.backoff_base_s = j.value("backoff_base_s", o.backoff_base_s);
  o.breaker_failures = j.value("breaker_failures", o.breaker_failures);
  o.breaker_open_s = j.value("breaker_open_s", o.breaker_open_s);
  return o;
}

// Cancels the current call when its first HTTP attempt has an outcome: the
// caller gives up during the backoff that follows, whatever the timing.
class CancelAfterAttempt final : public mesa_anyjev::gateway::GatewayObserver {
 public:
  void OnGatewayAttempt(const char* /*outcome*/,
                        absl::Duration /*took*/) override {
    if (armed != nullptr) armed->store(true);
  }
  void OnGatewayRetry() override {}
  void OnGatewayMissingLabel() override {}
  void OnGatewayBreaker(bool /*open*/) override {}

  std::atomic<bool>* armed = nullptr;  // the call's cancel flag, or none
};

}  // namespace

int main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  const nlohmann::json script = nlohmann::json::parse(input);
  CancelAfterAttempt canceller;
  GatewayOptions options = ReadOptions(script.at("options"));
  options.observer = &canceller;
  auto backend = GatewayBackend::Create(options);
  if (!backend.ok()) {
    std::cout << nlohmann::json{{"create_code", absl::StatusCodeToString(
                                                    backend.status().code())},
                                {"message", backend.status().message()}}
              << std::endl;
    return 2;
  }
  GatewayBackend& gateway = **backend;
  std::cout
      << nlohmann::json{{"name", gateway.identity().name},
                        {"max_choice_k", gateway.capabilities().max_choice_k},
                        {"logprob_top_k", gateway.capabilities().logprob_top_k},
                        {"hidden_states", gateway.capabilities().hidden_states},
                        {"hidden_states_code",
                         absl::StatusCodeToString(
                             gateway.HiddenStates({}, {}, CallControl{})
                                 .status()
                                 .code())}}
      << std::endl;
  if (script.value("liveness", false)) {
    const absl::Status live = gateway.Liveness(CallControl{});
    std::cout << nlohmann::json{{"liveness",
                                 absl::StatusCodeToString(live.code())},
                                {"message", live.message()}}
              << std::endl;
  }
  const auto& tokenizer = gateway.tokenizer();
  for (const nlohmann::json& call :
       script.value("calls", nlohmann::json::array())) {
    PromptGroup group;
    group.prefix = *tokenizer.Encode(call.value("prefix", std::string()));
    for (const auto& prompt : call.at("prompts")) {
      group.suffixes.push_back(*tokenizer.Encode(prompt.get<std::string>()));
    }
    for (const auto& label : call.at("labels")) {
      const auto ids = *tokenizer.Encode(label.get<std::string>());
      if (ids.size() != 1) {
        std::cerr << "label is not one token\n";
        return 2;
      }
      group.label_ids.push_back(ids[0]);
    }
    // "sleep_ms": wait before the call (a breaker's open period to pass:
    // a slower machine only waits longer); "cancel_after_attempt": the
    // caller cancels once the first attempt has its outcome.
    if (call.contains("sleep_ms")) {
      absl::SleepFor(absl::Milliseconds(call.at("sleep_ms").get<int64_t>()));
    }
    std::atomic<bool> cancelled{false};
    CallControl control;
    control.cancelled = &cancelled;
    canceller.armed =
        call.value("cancel_after_attempt", false) ? &cancelled : nullptr;
    const absl::Time start = absl::Now();
    if (call.contains("deadline_ms")) {
      control.deadline =
          start + absl::Milliseconds(call.at("deadline_ms").get<int64_t>());
    }
    const auto result =
        gateway.Logprobs({group}, call.value("top_k", 0), control);
    canceller.armed = nullptr;
    nlohmann::json out = {
        {"code", absl::StatusCodeToString(result.status().code())},
        {"message", result.status().message()},
        {"elapsed_ms", absl::ToDoubleMilliseconds(absl::Now() - start)},
        {"missing_label_events", gateway.missing_label_events()},
        {"requests", gateway.requests()}};
    if (result.ok()) {
      nlohmann::json values = nlohmann::json::array();
      nlohmann::json tops = nlohmann::json::array();
      for (const auto& prompt : (*result)[0]) {
        values.push_back(prompt.label_logprobs);
        nlohmann::json top = nlohmann::json::array();
        for (const auto& entry : prompt.top) {
          top.push_back({entry.id, entry.logprob});
        }
        tops.push_back(top);
      }
      out["label_logprobs"] = values;
      out["top"] = tops;
    }
    std::cout << out << std::endl;
  }
  return 0;
}
