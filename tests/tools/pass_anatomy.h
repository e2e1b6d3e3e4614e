// Where a forward pass's time goes (qwen3_dump's "profile" request): runs
// the work once under libtorch's profiler (Kineto; on CUDA its kernels come
// through CUPTI, on the CPU the operators) and gives each kernel or
// operator to the innermost stage the forward had open on the host when it
// was launched (server/model/stages.h names them "mesa.<stage>").
//
// The rows sum to the profiled span: on the CPU each stage's host time
// without its nested stages, plus the time in no stage; on CUDA each
// stage's kernel time on the device, the copies, and the device's idle
// time (while the host plans the pass, and the gaps between kernels).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>

namespace mesa_anyjev::tools {

// `run` does one call's work (warm it up before); `layers` is how many
// transformer layers the call runs, for the per-layer figures.
//   -> {"unit": "operators" | "kernels", "wall_ms", "span_ms", "sum_ms",
//       "passes", "layers", "rows": [{"stage", "count", "ms", "host_ms",
//       "per_layer"}], "per_layer": {"count", "ms"}, "unattributed",
//       "outside_span", "overlap_ms"}
nlohmann::json PassAnatomy(const std::function<void()>& run, bool cuda,
                           int64_t layers);

}  // namespace mesa_anyjev::tools
