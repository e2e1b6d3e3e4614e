#include "common/gateway/http_exchange.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::gateway {
namespace {

struct Transfer {
  std::string body;
  int64_t max_bytes = 0;
  bool too_big = false;
  const CallControl* control = nullptr;
};

size_t WriteBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (static_cast<int64_t>(transfer->body.size() + n) > transfer->max_bytes) {
    transfer->too_big = true;
    return 0;  // aborts the transfer
  }
  transfer->body.append(data, n);
  return n;
}

int Progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* transfer = static_cast<const Transfer*>(user);
  const CallControl* control = transfer->control;
  return control != nullptr && control->cancelled != nullptr &&
                 control->cancelled->load(std::memory_order_relaxed)
             ? 1
             : 0;
}

// This thread's curl handle. curl_easy_reset clears its options but keeps
// its connection cache, so retries and the next prompts on this worker
// reuse the open connection (keep-alive) instead of a new TCP and TLS
// handshake each.
CURL* ThreadHandle() {
  struct Handle {
    CURL* curl = curl_easy_init();
    ~Handle() {
      if (curl != nullptr) curl_easy_cleanup(curl);
    }
  };
  thread_local Handle handle;
  if (handle.curl != nullptr) curl_easy_reset(handle.curl);
  return handle.curl;
}

}  // namespace

void CurlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

absl::Status ParseUrl(const std::string& url, std::string* scheme,
                      std::string* host, std::string* path) {
  CURLU* handle = curl_url();
  if (handle == nullptr) return absl::InternalError("curl_url failed");
  absl::Status status;
  if (curl_url_set(handle, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
    status = absl::InvalidArgumentError(
        absl::StrCat("gateway base_url '", url, "' is not a URL"));
  } else {
    char* part = nullptr;
    if (curl_url_get(handle, CURLUPART_SCHEME, &part, 0) == CURLUE_OK) {
      *scheme = part;
      curl_free(part);
    }
    part = nullptr;
    if (curl_url_get(handle, CURLUPART_HOST, &part, 0) == CURLUE_OK) {
      *host = part;
      curl_free(part);
    }
    part = nullptr;
    if (curl_url_get(handle, CURLUPART_PATH, &part, 0) == CURLUE_OK) {
      *path = part;
      curl_free(part);
    }
  }
  curl_url_cleanup(handle);
  return status;
}

HttpResult Perform(const GatewayOptions& options,
                   const std::optional<std::string>& api_key,
                   const std::string& url, const std::string* post_body,
                   int64_t limit_ms, const CallControl& control) {
  HttpResult result;
  CURL* curl = ThreadHandle();
  if (curl == nullptr) {
    result.code = CURLE_FAILED_INIT;
    return result;
  }
  Transfer transfer;
  transfer.max_bytes = options.max_response_bytes;
  transfer.control = &control;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  if (api_key.has_value()) {
    headers = curl_slist_append(
        headers, absl::StrCat("Authorization: Bearer ", *api_key).c_str());
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (post_body != nullptr) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post_body->data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(post_body->size()));
  }
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_UNRESTRICTED_AUTH, 0L);
  curl_easy_setopt(curl, CURLOPT_VERBOSE, 0L);
  curl_easy_setopt(curl, CURLOPT_PROXY, "");  // ignore *_proxy variables
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  }
  if (!options.pinned_public_key.empty()) {
    curl_easy_setopt(curl, CURLOPT_PINNEDPUBLICKEY,
                     options.pinned_public_key.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(limit_ms));
  curl_easy_setopt(
      curl, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(std::min<int64_t>(
          limit_ms, static_cast<int64_t>(options.connect_timeout_s * 1e3))));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, Progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  result.code = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  result.http_status = http_status;
  curl_off_t retry_after = -1;
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
      retry_after > 0) {
    result.retry_after_s = static_cast<int64_t>(retry_after);
  }
  result.body = std::move(transfer.body);
  result.too_big = transfer.too_big;
  // The handle must not keep pointers into this call's headers and body.
  curl_easy_reset(curl);
  curl_slist_free_all(headers);  // holds the key: freed at once
  return result;
}

}  // namespace mesa_anyjev::gateway
