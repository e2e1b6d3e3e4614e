#include "client/commands/run_retries.h"

#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"

namespace mesa_anyjev::client {

void RetryDaemonCalls(Provider& provider, const std::string& command) {
  RetryOptions options;
  options.on_retry = [command](const absl::Status& failed, int attempt,
                               absl::Duration wait) {
    std::cerr << absl::StrFormat("mesa-anyjev %s: %s; try %d again in %.1f s\n",
                                 command, failed.message(), attempt + 1,
                                 absl::ToDoubleSeconds(wait));
  };
  provider.EnableRetries(std::make_shared<const RetryRule>(std::move(options)));
}

}  // namespace mesa_anyjev::client
