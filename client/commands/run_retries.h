// The long runs (annotate, bench run, learn fit) send their daemon calls
// again by the CLI's one retry rule (client/backends/retry_rule.h), with no
// deadline of their own: a daemon that restarts or drains mid-run delays
// the run instead of ending it. Each retry is said on stderr, so a run
// that waits for a daemon that never comes back is seen waiting.
#pragma once

#include <string>

#include "client/backends/provider.h"

namespace mesa_anyjev::client {

void RetryDaemonCalls(Provider& provider, const std::string& command);

}  // namespace mesa_anyjev::client
