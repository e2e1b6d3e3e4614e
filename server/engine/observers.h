// Several observers of one engine (engine_observer.h), each told every
// event in turn: the daemon's metrics, and its handler of what the metrics
// do not cover (a lost device, the log's notes, the pass records).
#pragma once

#include <string>
#include <vector>

#include "server/engine/engine_observer.h"

namespace mesa_anyjev::engine {

class Observers final : public EngineObserver {
 public:
  // Each outlives the fan-out (null ones are left out).
  explicit Observers(std::vector<EngineObserver*> each);

  void OnQueueDepth(int64_t depth) override;
  void OnRefused(const std::string& tenant, const std::string& limit) override;
  void OnQueueWait(Priority priority, absl::Duration wait) override;
  void OnSkipped(const std::string& reason) override;
  void OnRun(absl::Duration took) override;
  void OnTenantTokens(const std::string& tenant, Priority priority,
                      int64_t tokens) override;
  void OnPass(const PassRecord& pass) override;
  void OnPrefixLookups(int64_t hits, int64_t misses,
                       int64_t reused_tokens) override;
  void OnPrefixEvictions(int64_t blocks) override;
  void OnKvPool(int64_t in_use, int64_t cached, int64_t total,
                int64_t block_bytes) override;
  void OnDeviceLost(const absl::Status& status) override;
  void OnNote(const std::string& line) override;

 private:
  std::vector<EngineObserver*> each_;
};

}  // namespace mesa_anyjev::engine
