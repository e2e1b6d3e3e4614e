#include "server/model/host_block_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <catch2/catch.hpp>

namespace mesa_anyjev::model {
namespace {

TEST_CASE("The host block cache reuses large CPU blocks and keeps values",
          "[engine]") {
  InstallHostBlockCache(int64_t{64} << 20);
  const HostBlockCacheStats before = GetHostBlockCacheStats();
  void* first = nullptr;
  {
    at::Tensor a = at::empty({1 << 19}, at::kFloat);  // 2 MiB
    first = a.data_ptr();
    a.fill_(3.0f);
  }
  CHECK(GetHostBlockCacheStats().cached_bytes >= (int64_t{2} << 20));
  // A slightly smaller request of the same size class gets the same block.
  at::Tensor b = at::empty({(1 << 19) - 1000}, at::kFloat);
  CHECK(b.data_ptr() == first);
  const HostBlockCacheStats after = GetHostBlockCacheStats();
  CHECK(after.hits == before.hits + 1);
  CHECK(after.misses == before.misses + 1);
  b.fill_(1.0f);
  CHECK(b.sum().item<double>() == static_cast<double>(b.numel()));
  // Small tensors go to the allocator it replaced.
  const at::Tensor small = at::ones({16}, at::kFloat);
  CHECK(GetHostBlockCacheStats().misses == after.misses);
  CHECK(small.sum().item<double>() == 16.0);
}

TEST_CASE("The host block cache takes c10's raw allocate and deallocate",
          "[engine]") {
  InstallHostBlockCache(int64_t{64} << 20);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  for (const size_t n : {size_t{64}, size_t{3} << 20}) {
    void* p = allocator->raw_allocate(n);
    REQUIRE(p != nullptr);
    static_cast<char*>(p)[n - 1] = 1;
    allocator->raw_deallocate(p);
  }
}

TEST_CASE("Over its budget the cache returns blocks to the system",
          "[engine]") {
  InstallHostBlockCache(int64_t{64} << 20);  // budgets only rise
  { at::Tensor big = at::empty({int64_t{40} << 18}, at::kFloat); }  // 40 MiB
  { at::Tensor other = at::empty({int64_t{30} << 18}, at::kFloat); }
  CHECK(GetHostBlockCacheStats().cached_bytes <= (int64_t{64} << 20));
}

TEST_CASE("An allocation the system refuses is c10's out-of-memory error",
          "[engine]") {
  InstallHostBlockCache(int64_t{64} << 20);
  try {
    const at::Tensor huge = at::empty({int64_t{1} << 40}, at::kFloat);  // 4 TB
    FAIL("4 TB were allocated");
  } catch (const c10::OutOfMemoryError& e) {
    CHECK(std::string(e.what()).find("cannot allocate") != std::string::npos);
  }
}

}  // namespace
}  // namespace mesa_anyjev::model
