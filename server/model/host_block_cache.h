// libtorch's CPU tensors, large ones kept for reuse. A CPU pass allocates
// the same activation sizes in every layer and every pass; glibc serves
// allocations over 64 MiB made off the main thread with a fresh mmap each
// time (an arena heap cannot hold them), so every such op paid page faults
// and the kernel's zeroing of its pages, and smaller ones churned the heap.
// Installed as c10's CPU allocator: blocks of at least kMinBytes are cached
// by exact size after they are freed, up to a byte budget; smaller ones go
// to the allocator it replaced.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mesa_anyjev::model {

struct HostBlockCacheStats {
  int64_t hits = 0, misses = 0;
  int64_t cached_bytes = 0;  // freed blocks held for reuse now
};

// Installs the cache as c10's CPU allocator (once per process; later calls
// only raise the budget). Tensors allocated before keep their allocator.
void InstallHostBlockCache(int64_t budget_bytes);

HostBlockCacheStats GetHostBlockCacheStats();

}  // namespace mesa_anyjev::model
