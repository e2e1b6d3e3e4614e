#include "server/model/kernels/cuda_call.h"

#include <c10/util/Exception.h>

#include <cstdint>

#include "server/model/cuda/cuda_calls.h"

namespace mesa_anyjev::model::kernels {

cuda::Dtype LaunchDtype(const at::Tensor& t, const char* kernel) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return cuda::Dtype::kFloat32;
    case at::kBFloat16:
      return cuda::Dtype::kBFloat16;
    case at::kHalf:
      return cuda::Dtype::kFloat16;
    default:
      break;
  }
  TORCH_CHECK(false, kernel, ": dtype ", t.scalar_type(),
              " is not float32, bfloat16 or float16");
  return cuda::Dtype::kFloat32;
}

void CheckForLaunch(const char* kernel, const at::Device& device,
                    at::ScalarType dtype,
                    std::initializer_list<const at::Tensor*> tensors,
                    bool packed) {
  TORCH_CHECK(device.is_cuda(), kernel, ": runs on CUDA, not on ", device);
  for (const at::Tensor* t : tensors) {
    if (!t->defined()) continue;
    TORCH_CHECK(t->device() == device, kernel, ": a tensor on ", t->device(),
                ", the others on ", device);
    TORCH_CHECK(t->scalar_type() == dtype, kernel, ": a tensor of ",
                t->scalar_type(), ", the others ", dtype);
    TORCH_CHECK(t->is_contiguous(), kernel, ": a tensor is not contiguous");
    TORCH_CHECK(!packed || reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0,
                kernel, ": a tensor's data is not 16-byte aligned");
  }
}

cuda::Stream CurrentStream(const at::Device& device) {
  return model::cuda::CurrentStream(device.index());
}

void CheckLaunched(int error, const char* kernel) {
  TORCH_CHECK(error == 0, kernel, ": ", model::cuda::ErrorString(error));
}

}  // namespace mesa_anyjev::model::kernels
