// Whether a load fits before it starts (issue 25): the weights, the KV pool,
// the CPU's block cache, what a pass and the CUDA graphs take, and a
// reserve, against MemAvailable where the
// device's memory is the system's (the CPU, the GB10) and against the
// device's own free memory on a discrete GPU. Running the GB10 out of memory
// livelocks the whole machine instead of failing one process, so the daemon
// refuses to start with one line instead.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/model/device_facts.h"

namespace mesa_anyjev::model {

// What stays allocated once the model is loaded. A load's peak is higher
// on the CPU by the checkpoint's mapped file pages, which the kernel can
// reclaim (page cache), so they are not counted (docs/operations.md).
struct MemoryPlan {
  int64_t weights = 0;     // the converted weights
  int64_t kv_pool = 0;     // engine.kv_pool_bytes
  int64_t host_cache = 0;  // engine.host_cache_bytes (CPU only, else 0)
  int64_t reserve = 0;     // engine.memory_reserve_bytes
  // What a full pass allocates beyond the weights and the pool: a layer's
  // activations for engine.batch_tokens tokens and lm_head's float32
  // logits and log-probabilities of one chunk of output rows.
  int64_t pass = 0;
  int64_t graph_pool = 0;  // the CUDA graphs' pool (engine.cuda_graph_tokens)
};

// OK when the plan fits in `available` bytes (MemAvailable when
// facts.shared_memory, else facts.device_free_bytes); otherwise
// INVALID_ARGUMENT with one line naming the figures, what they were checked
// against, and the settings to change.
absl::Status CheckMemoryFits(const MemoryPlan& plan, const DeviceFacts& facts,
                             int64_t mem_available);

// 17179869184 -> "17.18 GB" (decimal, as free(1) -h and the docs say).
std::string Gigabytes(int64_t bytes);

}  // namespace mesa_anyjev::model
