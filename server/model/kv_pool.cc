#include "server/model/kv_pool.h"

#include <ATen/ATen.h>

namespace mesa_anyjev::model {

KvPool::KvPool(int64_t layers, int64_t slots, int64_t kv_heads,
               int64_t head_dim, const at::TensorOptions& options) {
  for (int64_t i = 0; i < layers; ++i) {
    keys_.push_back(at::empty({slots, kv_heads, head_dim}, options));
    values_.push_back(at::empty({slots, kv_heads, head_dim}, options));
  }
}

void KvPool::Update(int32_t layer, const KvWrites& writes, const at::Tensor& k,
                    const at::Tensor& v) {
  const size_t i = static_cast<size_t>(layer);
  keys_[i].index_copy_(0, writes.slots, k);
  values_[i].index_copy_(0, writes.slots, v);
  ApplyCopies(layer, writes);
}

void KvPool::ApplyCopies(int32_t layer, const KvWrites& writes) {
  const size_t i = static_cast<size_t>(layer);
  if (!writes.copy_from.defined()) return;
  for (at::Tensor* pool : {&keys_[i], &values_[i]}) {
    pool->index_copy_(0, writes.copy_to,
                      pool->index_select(0, writes.copy_from));
  }
}

}  // namespace mesa_anyjev::model
