// model.kernels: which of the model's memory-bound stages run as our own
// fused CUDA kernels (server/model/kernels/) instead of the ATen
// composition. Plain C++ so the config validator and the unit tests reach
// it without libtorch; the model takes the resolved set at load.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mesa_anyjev::config {

struct KernelSet {
  bool add_rms_norm = false;  // residual add + RMSNorm (and RMSNorm alone)
  bool qk_norm_rope = false;  // q/k per-head RMSNorm + rotary + the KV write
  bool silu_mul = false;      // SiLU(gate) * up

  bool any() const { return add_rms_norm || qk_norm_rope || silu_mul; }
  bool operator==(const KernelSet&) const = default;
  // "aten", "fused" or the comma list, in the order above.
  std::string ToString() const;
};

// "aten" (none of ours, the default), "fused" (all of ours) or a comma list
// of kernel names (spaces around names ignored). The error names the
// offending item and the choices; the caller prefixes the key.
absl::StatusOr<KernelSet> ParseKernelSet(absl::string_view text);

// What runs where: our kernels run only on a CUDA device and only in a
// build that compiled them (a cross-compiled build has none). Anything asked
// for that cannot run falls back to the ATen path, and `note` (when not
// null) gets one line saying so, for the load log; it is cleared otherwise.
KernelSet ResolveKernelSet(const KernelSet& asked, bool cuda_device,
                           bool kernels_built, std::string* note);

}  // namespace mesa_anyjev::config
