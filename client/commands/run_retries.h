// The retry rule of a long run (decide --out, annotate, bench run, learn
// fit; client/backends/retry_rule.h), handed to MakeProvider so that every
// daemon call of the run goes by it, the first GetModelInfo included: a
// daemon that restarts or drains mid-run, or is still starting, delays the
// run instead of ending it. Each retry is said on stderr, so a run waiting
// for a daemon that never comes back is seen waiting, until a progress line
// on a terminal shows the count instead.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "client/backends/retry_rule.h"

namespace mesa_anyjev::client {

class RunRetries {
 public:
  // `deadline`: the whole run's (decide --deadline), none by default.
  explicit RunRetries(const std::string& command,
                      absl::Time deadline = absl::InfiniteFuture());

  const std::shared_ptr<const RetryRule>& rule() const { return rule_; }

  // From now on retries are counted, not said.
  void Quiet() { quiet_->store(true); }

 private:
  std::shared_ptr<std::atomic<bool>> quiet_ =
      std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<const RetryRule> rule_;
};

}  // namespace mesa_anyjev::client
