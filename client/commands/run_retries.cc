#include "client/commands/run_retries.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_format.h"

namespace mesa_anyjev::client {

RunRetries::RunRetries(const std::string& command, absl::Time deadline) {
  RetryOptions options;
  options.deadline = deadline;
  // As the Python client's RetryPolicy: client.timeout_s (30 s) suits one
  // interactive call, not one of several a run keeps queued.
  options.min_attempt_timeout = absl::Seconds(120);
  options.on_retry = [command, quiet = quiet_](const absl::Status& failed,
                                               int attempt,
                                               absl::Duration wait) {
    if (quiet->load()) return;
    std::cerr << absl::StrFormat("mesa-anyjev %s: %s; try %d again in %.1f s\n",
                                 command, failed.message(), attempt + 1,
                                 absl::ToDoubleSeconds(wait));
  };
  rule_ = std::make_shared<const RetryRule>(std::move(options));
}

}  // namespace mesa_anyjev::client
