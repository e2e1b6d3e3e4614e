// What the engine reports as it works; the metrics layer implements it, so
// the engine never sees Prometheus types.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace mesa_anyjev::engine {

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // Scheduler
  virtual void OnQueueDepth(int64_t /*depth*/) {}
  virtual void OnQueueWait(absl::Duration /*wait*/) {}
  virtual void OnSkipped(const std::string& /*reason*/) {
  }  // deadline|cancelled
  virtual void OnRun(absl::Duration /*took*/) {}
  // Model work: one forward over `prompts` rows and `tokens` real tokens.
  virtual void OnBatch(int64_t /*prompts*/, int64_t /*tokens*/,
                       absl::Duration /*took*/) {}
  // Prefix cache
  virtual void OnPrefixLookup(bool /*hit*/, int64_t /*reused_tokens*/) {}
  virtual void OnPrefixEviction() {}
  virtual void OnPrefixCacheSize(int64_t /*bytes*/, int64_t /*entries*/) {}
};

}  // namespace mesa_anyjev::engine
