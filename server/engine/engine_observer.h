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
  // JobQueue
  virtual void OnQueueDepth(int64_t /*depth*/) {}
  virtual void OnQueueWait(absl::Duration /*wait*/) {}
  virtual void OnSkipped(const std::string& /*reason*/) {
  }  // deadline|cancelled
  virtual void OnRun(absl::Duration /*took*/) {}
  // Model work: one forward pass of `segments` packed segments and `tokens`
  // new tokens.
  virtual void OnBatch(int64_t /*segments*/, int64_t /*tokens*/,
                       absl::Duration /*took*/) {}
  // Prefix cache lookups of one call (one per prompt group), and the
  // prefix positions they found.
  virtual void OnPrefixLookups(int64_t /*hits*/, int64_t /*misses*/,
                               int64_t /*reused_tokens*/) {}
  virtual void OnPrefixEvictions(int64_t /*blocks*/) {}
  // The KV pool after a call: blocks held by work in flight, blocks in the
  // prefix cache, all blocks, and the bytes of one block.
  virtual void OnKvPool(int64_t /*in_use*/, int64_t /*cached*/,
                        int64_t /*total*/, int64_t /*block_bytes*/) {}
};

}  // namespace mesa_anyjev::engine
