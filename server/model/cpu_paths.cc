#include "server/model/cpu_paths.h"

#include <ATen/ATen.h>
#include <malloc.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/model/row_norm.h"

namespace mesa_anyjev::model {

bool KeepFreedHeap() {
  // mallopt returns 1 where glibc took the setting.
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim =
      mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1;
  return no_mmap && no_trim;
}

CpuPaths ChooseCpuPaths(const at::TensorOptions& options,
                        model::Attention attention, int64_t head_dim,
                        bool heap_kept, int64_t host_cache_bytes) {
  CpuPaths paths;
  // The q/k rows [tokens, heads, head_dim] as the model hands them over.
  paths.fused_norms =
      model::RowNormApplies(at::empty({1, 1, head_dim}, options));
  // attention.cc takes the CPU flash kernel for sdpa on the CPU.
  paths.flash_attention =
      attention == model::Attention::kSdpa && options.device().is_cpu();
  paths.heap_kept = heap_kept;
  paths.host_cache_bytes = host_cache_bytes;
  return paths;
}

std::string DescribeCpuPaths(const CpuPaths& paths) {
  return absl::StrCat(
      "norms ", paths.fused_norms ? "fused (row_norm)" : "ATen", ", attention ",
      paths.flash_attention ? "flash (CPU kernel)" : "eager (ATen)", ", heap ",
      paths.heap_kept ? "kept (mallopt)" : "glibc defaults (mallopt not taken)",
      ", host block cache ",
      paths.host_cache_bytes > 0
          ? absl::StrCat(paths.host_cache_bytes, " bytes")
          : "off");
}

}  // namespace mesa_anyjev::model
