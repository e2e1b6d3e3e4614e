// The engine's keys and values: per transformer layer one [slots, kv, D]
// tensor in the model's dtype and device, allocated once and shared by every
// pass and the prefix cache (server/engine/kv_blocks.h keeps the books of
// which slots hold what). A pass reaches it through one verb, Update, and
// reads a layer's keys and values for attention; KvWrites is the seam
// between the planner's slots and the forward.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mesa_anyjev::model {

// Where one pass's keys and values go.
struct KvWrites {
  at::Tensor slots;  // [N] int64: the pool slot of each token of the pass
  // [C] int64 (undefined: none): slots copied from -> to after the pass's
  // own are written, so a copy's source may be one of them.
  at::Tensor copy_from, copy_to;
};

class KvPool {
 public:
  KvPool() = default;
  // Not initialised: a pass reads only slots written before.
  KvPool(int64_t layers, int64_t slots, int64_t kv_heads, int64_t head_dim,
         const at::TensorOptions& options);

  // Layer `layer`'s keys and values of a pass ([N, kv, D] each) at their
  // slots, then the pass's copies: every key of the pass is in place before
  // any of its segments attends, so a segment may follow another.
  void Update(int32_t layer, const KvWrites& writes, const at::Tensor& k,
              const at::Tensor& v);
  // Only the pass's copies, for a layer whose keys and values a kernel
  // wrote itself.
  void ApplyCopies(int32_t layer, const KvWrites& writes);
  const at::Tensor& keys(int32_t layer) const {
    return keys_[static_cast<size_t>(layer)];
  }
  const at::Tensor& values(int32_t layer) const {
    return values_[static_cast<size_t>(layer)];
  }

 private:
  std::vector<at::Tensor> keys_, values_;
};

}  // namespace mesa_anyjev::model
