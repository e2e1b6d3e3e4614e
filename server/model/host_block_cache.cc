#include "server/model/host_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace mesa_anyjev::model {
namespace {

// Below this, glibc's heap serves allocations well; above it, reuse pays.
constexpr size_t kMinBytes = size_t{1} << 20;
// c10's own CPU alignment (c10::gAlignment, 64 bytes on every non-mobile
// build, aarch64 included: enough for AVX-512 and SVE loads).
constexpr size_t kAlignment = 64;

// The size class of a request: the power of two above it cut in 8 steps,
// so passes of a few tokens more or less reuse each other's blocks and no
// block is more than 1/8 larger than asked.
size_t SizeClass(size_t n) {
  size_t power = kMinBytes;
  while (power < n) power <<= 1;
  const size_t step = power / 16;
  return (n + step - 1) / step * step;
}

class HostBlockCache final : public c10::Allocator {
 public:
  explicit HostBlockCache(c10::Allocator* small) : small_(small) {}

  c10::DataPtr allocate(size_t asked) override {
    if (asked < kMinBytes) return small_->allocate(asked);
    const size_t n = SizeClass(asked);
    void* data = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(n);
      if (it != free_.end() && !it->second.empty()) {
        data = it->second.back();
        it->second.pop_back();
        cached_ -= static_cast<int64_t>(n);
        ++hits_;
      } else {
        ++misses_;
      }
    }
    if (data == nullptr) {
      const int error = posix_memalign(&data, kAlignment, n);
      // c10's own error type and wording, so a failed load says how much.
      TORCH_CHECK_WITH(OutOfMemoryError, error == 0,
                       "host block cache: cannot allocate ", n,
                       " bytes: ", std::strerror(error));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[data] = n;
    }
    // A simple pointer (context = data), as c10's raw_allocate expects.
    return {data, data, &Deallocate, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Deallocate; }

  void copy_data(void* dest, const void* src,
                 std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  void RaiseBudget(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > budget_) budget_ = bytes;
  }

  HostBlockCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, cached_};
  }

 private:
  static void Deallocate(void* data);

  // A block of ours is kept for reuse; over the budget the largest cached
  // blocks go back to the system first, so the sizes in use now stay.
  // Anything else came from the allocator this one replaced.
  void Free(void* data) {
    std::vector<void*> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(data);
      if (it == live_.end()) {
        small_->raw_deleter()(data);
        return;
      }
      const size_t n = it->second;
      live_.erase(it);
      while (cached_ + static_cast<int64_t>(n) > budget_ && !free_.empty()) {
        auto largest = std::prev(free_.end());
        evicted.insert(evicted.end(), largest->second.begin(),
                       largest->second.end());
        cached_ -=
            static_cast<int64_t>(largest->first * largest->second.size());
        free_.erase(largest);
      }
      if (cached_ + static_cast<int64_t>(n) <= budget_) {
        free_[n].push_back(data);
        cached_ += static_cast<int64_t>(n);
        data = nullptr;
      }
    }
    for (void* block : evicted) std::free(block);
    std::free(data);
  }

  c10::Allocator* const small_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> live_;     // our blocks in use
  std::map<size_t, std::vector<void*>> free_;  // by size class
  int64_t budget_ = 0, cached_ = 0, hits_ = 0, misses_ = 0;
};

// Lives as long as the process: a tensor may be freed during exit.
HostBlockCache* Instance() {
  static HostBlockCache* cache = [] {
    auto* c = new HostBlockCache(c10::GetCPUAllocator());
    c10::SetCPUAllocator(c, /*priority=*/1);
    return c;
  }();
  return cache;
}

void HostBlockCache::Deallocate(void* data) { Instance()->Free(data); }

}  // namespace

void InstallHostBlockCache(int64_t budget_bytes) {
  Instance()->RaiseBudget(budget_bytes);
}

HostBlockCacheStats GetHostBlockCacheStats() { return Instance()->Stats(); }

}  // namespace mesa_anyjev::model
