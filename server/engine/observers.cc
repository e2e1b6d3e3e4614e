#include "server/engine/observers.h"

#include <algorithm>

namespace mesa_anyjev::engine {

Observers::Observers(std::vector<EngineObserver*> each)
    : each_(std::move(each)) {
  each_.erase(std::remove(each_.begin(), each_.end(), nullptr), each_.end());
}

void Observers::OnQueueDepth(int64_t depth) {
  for (EngineObserver* o : each_) o->OnQueueDepth(depth);
}
void Observers::OnRefused(const std::string& tenant, const std::string& limit) {
  for (EngineObserver* o : each_) o->OnRefused(tenant, limit);
}
void Observers::OnQueueWait(Priority priority, absl::Duration wait) {
  for (EngineObserver* o : each_) o->OnQueueWait(priority, wait);
}
void Observers::OnSkipped(const std::string& reason) {
  for (EngineObserver* o : each_) o->OnSkipped(reason);
}
void Observers::OnRun(absl::Duration took) {
  for (EngineObserver* o : each_) o->OnRun(took);
}
void Observers::OnTenantTokens(const std::string& tenant, Priority priority,
                               int64_t tokens) {
  for (EngineObserver* o : each_) o->OnTenantTokens(tenant, priority, tokens);
}
void Observers::OnPass(const PassRecord& pass) {
  for (EngineObserver* o : each_) o->OnPass(pass);
}
void Observers::OnPrefixLookups(int64_t hits, int64_t misses,
                                int64_t reused_tokens) {
  for (EngineObserver* o : each_)
    o->OnPrefixLookups(hits, misses, reused_tokens);
}
void Observers::OnPrefixEvictions(int64_t blocks) {
  for (EngineObserver* o : each_) o->OnPrefixEvictions(blocks);
}
void Observers::OnKvPool(int64_t in_use, int64_t cached, int64_t total,
                         int64_t block_bytes) {
  for (EngineObserver* o : each_)
    o->OnKvPool(in_use, cached, total, block_bytes);
}
void Observers::OnDeviceLost(const absl::Status& status) {
  for (EngineObserver* o : each_) o->OnDeviceLost(status);
}
void Observers::OnNote(const std::string& line) {
  for (EngineObserver* o : each_) o->OnNote(line);
}

}  // namespace mesa_anyjev::engine
