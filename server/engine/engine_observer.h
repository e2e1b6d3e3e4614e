// What the engine reports as it works; the daemon implements it (its
// metrics, its log, its handler of a lost device), so the engine never sees
// Prometheus types or a logger. Called on the engine thread unless said.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/backend.h"

namespace mesa_anyjev::engine {

// One forward pass as the daemon's records show it (engine.pass_records):
// its size and whose work it held, in planning order.
struct PassRecord {
  struct Share {
    std::string tenant;
    Priority priority = Priority::kInteractive;
    int64_t tokens = 0;  // new tokens of the tenant's calls in the pass
  };
  int64_t number = 0;  // counted from 1 since the model loaded
  int64_t segments = 0;
  int64_t tokens = 0;
  int64_t rows = 0;
  std::vector<Share> shares;
  absl::Duration took;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // Held calls none of whose work is planned yet (any thread, under the
  // engine's lock).
  virtual void OnQueueDepth(int64_t /*depth*/) {}
  // A call refused at admission by a limit: "capacity", "tenant_calls" or
  // "tenant_tokens" (any thread).
  virtual void OnRefused(const std::string& /*tenant*/,
                         const std::string& /*limit*/) {}
  // From admission to its first planned work (or to being dropped).
  virtual void OnQueueWait(Priority /*priority*/, absl::Duration /*wait*/) {}
  virtual void OnSkipped(const std::string& /*reason*/) {
  }  // deadline|cancelled
  // From admission to the answer of a call that ran.
  virtual void OnRun(absl::Duration /*took*/) {}
  // New tokens run through the model for a tenant's calls of a class.
  virtual void OnTenantTokens(const std::string& /*tenant*/,
                              Priority /*priority*/, int64_t /*tokens*/) {}
  // Model work: one forward pass, or one merged call of a model without
  // passes (its segments are its prompt groups).
  virtual void OnPass(const PassRecord& /*pass*/) {}
  // Prefix cache lookups of one pass (one per prompt group started), and
  // the prefix positions they found.
  virtual void OnPrefixLookups(int64_t /*hits*/, int64_t /*misses*/,
                               int64_t /*reused_tokens*/) {}
  virtual void OnPrefixEvictions(int64_t /*blocks*/) {}
  // The KV pool after a pass: blocks held by work in flight, blocks in the
  // prefix cache, all blocks, and the bytes of one block.
  virtual void OnKvPool(int64_t /*in_use*/, int64_t /*cached*/,
                        int64_t /*total*/, int64_t /*block_bytes*/) {}
  // The device failed so that its context is unusable (device_fault.h): the
  // engine refuses every call from now on. Once. The handler must return at
  // once: it runs on the engine thread.
  virtual void OnDeviceLost(const absl::Status& /*status*/) {}
  // Something the engine or the runner did that the log should say (a
  // hold begun, a CUDA graph shape turned off after its capture failed).
  virtual void OnNote(const std::string& /*line*/) {}
};

}  // namespace mesa_anyjev::engine
