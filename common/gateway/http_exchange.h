// One HTTP exchange with a gateway through libcurl, with every transport
// rule applied: TLS verification (CA file, pinned key), the key only as a
// bearer header, no redirects, no proxy, a capped body, the caller's
// deadline and cancel flag. The protocol on top (what is asked, retries,
// the breaker) is GatewayBackend's.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/backend.h"
#include "common/gateway/gateway_backend.h"

namespace mesa_anyjev::gateway {

// libcurl's global state, once per process.
void CurlGlobalInit();

// The scheme, host and path of `url` by libcurl's own parser (the one that
// sends it); INVALID_ARGUMENT when it is no URL.
absl::Status ParseUrl(const std::string& url, std::string* scheme,
                      std::string* host, std::string* path);

// What one exchange gave: curl's code (CURLE_OK: an HTTP answer came),
// the status, the body (empty once it passed max_response_bytes: too_big).
struct HttpResult {
  CURLcode code = CURLE_OK;
  int64_t http_status = 0;
  std::string body;
  bool too_big = false;
  int64_t retry_after_s = -1;  // a Retry-After header in seconds, else -1
};

// `post_body` null = GET. Bounded by `limit_ms` and `control`'s cancel flag.
HttpResult Perform(const GatewayOptions& options,
                   const std::optional<std::string>& api_key,
                   const std::string& url, const std::string* post_body,
                   int64_t limit_ms, const CallControl& control);

}  // namespace mesa_anyjev::gateway
