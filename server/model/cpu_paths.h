// The CPU-specific paths a CPU model runs besides its projections (those
// are packed_linear.h's choice), and the start log's line naming them. Each
// is chosen by a check that is the same on every architecture (x86_64 and
// the GB10's aarch64 alike: `make check-arm64` runs them under qemu-user):
// the fused norms where row_norm.h takes the model's rows, libtorch's CPU
// flash kernel for attention sdpa, glibc keeping freed memory where
// mallopt takes the setting, the host block cache where it has a budget.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "server/model/attention.h"

namespace mesa_anyjev::model {

struct CpuPaths {
  bool fused_norms = false;      // row_norm.h, else the ATen composition
  bool flash_attention = false;  // the CPU flash kernel, else ATen's eager
  bool heap_kept = false;        // KeepFreedHeap() took, else glibc defaults
  int64_t host_cache_bytes = 0;  // host_block_cache.h's budget; 0 = off
};

// Sets glibc to keep freed memory in the heap (no mmap for large blocks, no
// trimming): a CPU pass's activations are over its mmap threshold, so each
// would be mapped, page-faulted in and unmapped again (docs/model.md).
// True where glibc took both settings (a sanitizer's allocator takes none).
bool KeepFreedHeap();

// The paths a model on `options`' device and dtype with `attention` and
// rows of `head_dim` runs.
CpuPaths ChooseCpuPaths(const at::TensorOptions& options,
                        model::Attention attention, int64_t head_dim,
                        bool heap_kept, int64_t host_cache_bytes);

// "norms fused (row_norm), attention eager (ATen), heap kept (mallopt),
// host block cache N bytes".
std::string DescribeCpuPaths(const CpuPaths& paths);

}  // namespace mesa_anyjev::model
