#include "server/model/pass_upload.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace mesa_anyjev::model {

PassUpload::Handle PassUpload::Stage(const std::vector<int64_t>& values) {
  const Handle handle{static_cast<int64_t>(staged_.size()),
                      static_cast<int64_t>(values.size())};
  staged_.insert(staged_.end(), values.begin(), values.end());
  return handle;
}

void PassUpload::Upload(at::Device device) {
  const int64_t n = static_cast<int64_t>(staged_.size());
  const bool cuda = device.is_cuda();
  at::Tensor host =
      at::empty({n}, at::TensorOptions(at::kLong).pinned_memory(cuda));
  std::copy(staged_.begin(), staged_.end(), host.data_ptr<int64_t>());
  // From pinned memory the copy is queued on the stream and the host goes
  // on; the caching host allocator keeps the buffer until the copy ran.
  device_ = cuda ? host.to(device, /*non_blocking=*/true) : host;
}

at::Tensor PassUpload::View(Handle handle) const {
  TORCH_CHECK(device_.defined(), "PassUpload::View before Upload");
  return device_.narrow(0, handle.offset, handle.size);
}

}  // namespace mesa_anyjev::model
