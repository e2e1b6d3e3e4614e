// The gateway backend's pure parts: the retry/backoff schedule, the HTTP
// status mapping (docs/gateway.md), the circuit breaker's state
// machine, the label lookup, and the URL rules checked at construction.
#include "common/gateway/gateway_backend.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "common/decision/decider.h"
#include "common/decision/question.h"

namespace mesa_anyjev::gateway {
namespace {

TEST_CASE("gateway: backoff doubles per attempt with +-25% jitter",
          "[gateway]") {
  // The reference's schedule (0.5, 1, 2 s) at the jitter's midpoint.
  CHECK(BackoffDelay(0, 0.5, 0.5) == absl::Milliseconds(500));
  CHECK(BackoffDelay(1, 0.5, 0.5) == absl::Seconds(1));
  CHECK(BackoffDelay(2, 0.5, 0.5) == absl::Seconds(2));
  // The jitter's bounds, and u clamped to [0, 1].
  CHECK(BackoffDelay(1, 0.5, 0.0) == absl::Milliseconds(750));
  CHECK(BackoffDelay(1, 0.5, 1.0) == absl::Milliseconds(1250));
  CHECK(BackoffDelay(1, 0.5, -3.0) == absl::Milliseconds(750));
  CHECK(BackoffDelay(1, 0.5, 7.0) == absl::Milliseconds(1250));
}

TEST_CASE("gateway: only 429 and 5xx are retried", "[gateway]") {
  CHECK(IsRetryableHttpStatus(429));
  CHECK(IsRetryableHttpStatus(500));
  CHECK(IsRetryableHttpStatus(502));
  CHECK(IsRetryableHttpStatus(503));
  CHECK(IsRetryableHttpStatus(504));
  for (int64_t code : {200, 301, 400, 401, 403, 404, 408, 422}) {
    CHECK_FALSE(IsRetryableHttpStatus(code));
  }
}

TEST_CASE("gateway: HTTP statuses map to the router's codes", "[gateway]") {
  const std::map<int64_t, absl::StatusCode> table = {
      {400, absl::StatusCode::kInvalidArgument},
      {422, absl::StatusCode::kInvalidArgument},
      {401, absl::StatusCode::kUnauthenticated},
      {403, absl::StatusCode::kPermissionDenied},
      {404, absl::StatusCode::kNotFound},
      {408, absl::StatusCode::kDeadlineExceeded},
      {504, absl::StatusCode::kDeadlineExceeded},
      {429, absl::StatusCode::kResourceExhausted},
      {502, absl::StatusCode::kUnavailable},
      {503, absl::StatusCode::kUnavailable},
      {500, absl::StatusCode::kUnavailable},
      {302, absl::StatusCode::kUnknown},
  };
  for (const auto& [http, code] : table) {
    INFO("HTTP " << http);
    CHECK(HttpStatusToStatus(http, "body").code() == code);
  }
  const absl::Status rejected =
      HttpStatusToStatus(400, std::string(1000, 'x') + "tail");
  CHECK_THAT(std::string(rejected.message()),
             Catch::Contains("gateway rejected the request"));
  CHECK_THAT(std::string(rejected.message()),
             !Catch::Contains("tail"));  // the body is cut at 300 bytes
}

TEST_CASE("gateway: the circuit breaker opens, refuses, and one probe decides",
          "[gateway]") {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  CircuitBreaker breaker(3, absl::Seconds(60));
  const auto closed = [&](absl::Time t) {
    const auto check = breaker.Check(t);
    return check.ok() && *check == 0;
  };
  CHECK(closed(t0));

  SECTION("3 consecutive failures open it for 60 s; a good probe closes it") {
    breaker.Failure(t0);
    breaker.Failure(t0);
    CHECK(closed(t0));
    breaker.Failure(t0 + absl::Seconds(1));
    CHECK(breaker.open(t0 + absl::Seconds(1)));
    const absl::Status refused = breaker.Check(t0 + absl::Seconds(30)).status();
    CHECK(refused.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(refused.message()),
               Catch::Contains("circuit breaker is open"));
    CHECK_FALSE(breaker.Check(t0 + absl::Seconds(60.5)).ok());
    // After the open period one caller probes; the others wait for it.
    const auto probe = breaker.Check(t0 + absl::Seconds(61));
    REQUIRE(probe.ok());
    CHECK(*probe != 0);
    const auto other = breaker.Check(t0 + absl::Seconds(61));
    REQUIRE_FALSE(other.ok());
    CHECK_THAT(std::string(other.status().message()),
               Catch::Contains("half-open"));
    breaker.Success();
    CHECK(closed(t0 + absl::Seconds(62)));
    CHECK_FALSE(breaker.open(t0 + absl::Seconds(62)));
    breaker.Failure(t0 + absl::Seconds(62));
    breaker.Failure(t0 + absl::Seconds(62));
    CHECK(closed(t0 + absl::Seconds(62)));
  }

  SECTION("a failed probe opens it for another full period") {
    for (int i = 0; i < 3; ++i) breaker.Failure(t0);
    const auto probe = breaker.Check(t0 + absl::Seconds(60));
    REQUIRE(probe.ok());
    breaker.Failure(t0 + absl::Seconds(61));
    CHECK_FALSE(breaker.Check(t0 + absl::Seconds(120)).ok());
    CHECK(breaker.Check(t0 + absl::Seconds(121)).ok());
  }

  SECTION("a probe that ends undecided hands the probe on") {
    for (int i = 0; i < 3; ++i) breaker.Failure(t0);
    const auto probe = breaker.Check(t0 + absl::Seconds(60));
    REQUIRE(probe.ok());
    breaker.Release(*probe + 1);  // not the probe's token: nothing changes
    CHECK_FALSE(breaker.Check(t0 + absl::Seconds(60)).ok());
    breaker.Release(*probe);
    const auto next = breaker.Check(t0 + absl::Seconds(60));
    REQUIRE(next.ok());
    CHECK(*next != 0);
    CHECK(*next != *probe);
  }

  SECTION("a success resets the count") {
    breaker.Failure(t0);
    breaker.Failure(t0);
    breaker.Success();
    breaker.Failure(t0);
    breaker.Failure(t0);
    CHECK(closed(t0));
    breaker.Failure(t0);
    CHECK_FALSE(breaker.Check(t0).ok());
  }
}

TEST_CASE("gateway: labels are found by decoded text, then raw spelling",
          "[gateway]") {
  const std::map<std::string, double> top = {{"A", -0.5},
                                             {"\xC4\xA0"
                                              "B",
                                              -1.5},
                                             {" Yes", -2.0}};
  CHECK(LookupLabel(top, "A", "A") == -0.5);
  CHECK(LookupLabel(top, " B",
                    "\xC4\xA0"
                    "B") == -1.5);  // "ĠB"
  CHECK(LookupLabel(top, " Yes",
                    "\xC4\xA0"
                    "Yes") == -2.0);
  CHECK_FALSE(LookupLabel(top, "C", "C").has_value());
  CHECK(kMissingLogprob == -30.0);
}

TEST_CASE("gateway: base URLs are checked at construction", "[gateway]") {
  GatewayOptions options;
  options.served_model = "m";
  options.tokenizer = MESA_ANYJEV_TEST_DATA "/qwen3-tokenizer";
  for (const char* url : {"http://example.com", "http://192.168.1.2:8000",
                          "http://127.0.0.2:80"}) {
    INFO(url);
    options.base_url = url;
    const auto backend = GatewayBackend::Create(options);
    REQUIRE_FALSE(backend.ok());
    CHECK(backend.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(backend.status().message()),
               Catch::Contains("loopback"));
  }
  options.base_url = "https://gateway.example.org/v1/";
  CHECK_THAT(std::string(GatewayBackend::Create(options).status().message()),
             Catch::Contains("must not end in /v1"));
  for (const char* url : {"http://127.0.0.1:8000", "http://localhost:1/",
                          "http://[::1]:8000", "https://gateway.example.org"}) {
    INFO(url);
    options.base_url = url;
    const auto backend = GatewayBackend::Create(options);
    REQUIRE(backend.ok());
    CHECK((*backend)->capabilities().max_choice_k == 8);
    CHECK((*backend)->capabilities().logprob_top_k == 20);
    CHECK_FALSE((*backend)->capabilities().hidden_states);
    CHECK((*backend)->HiddenStates({}, {}, CallControl{}).status().code() ==
          absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("gateway: the decision layer refuses K > 8 and L2 before sending",
          "[gateway]") {
  // Nothing listens on port 1: a request would come back UNAVAILABLE.
  GatewayOptions options;
  options.base_url = "http://127.0.0.1:1";
  options.served_model = "m";
  options.tokenizer = MESA_ANYJEV_TEST_DATA "/qwen3-tokenizer";
  options.backoff_base_s = 0.01;
  auto backend = GatewayBackend::Create(options);
  REQUIRE(backend.ok());
  decision::Decider decider(backend->get());
  const std::vector<std::string> states = {"The sky is blue today."};

  const auto wide = decision::Question::Choice(
      "Which?", {"a", "b", "c", "d", "e", "f", "g", "h", "i"});
  REQUIRE(wide.ok());
  const auto refused = decider.Decide(states, {*wide}, decision::Level::kRaw);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("max_choice_k=8"));

  const decision::Question noul = decision::Question::Noul("Is it blue?");
  const auto l2 = decider.Decide(states, {noul}, decision::Level::kL2);
  CHECK(l2.status().code() == absl::StatusCode::kFailedPrecondition);

  // A question it accepts goes to the (absent) gateway: 3 attempts, then
  // UNAVAILABLE; nothing answered, nothing counted.
  const auto unreachable =
      decider.Decide(states, {noul}, decision::Level::kRaw);
  CHECK(unreachable.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(unreachable.status().message()),
             Catch::Contains("after 3 attempts"));
  CHECK((*backend)->requests() == 0);
}

}  // namespace
}  // namespace mesa_anyjev::gateway
