// The launchers of a build without the .cu files (cross-compiled for
// aarch64, where that build runs on the CPU only): KernelsBuilt() is false
// there, so the model never calls them (resolve.h).
#include "server/model/kernels/cuda_launch.h"

namespace mesa_anyjev::model::kernels::cuda {

cudaError_t LaunchAddRmsNorm(Dtype, const void*, void*, const void*, void*,
                             int64_t, int64_t, float, cudaStream_t) {
  return cudaErrorNotSupported;
}

cudaError_t LaunchQkNormRope(Dtype, const QkNormRopeArgs&, cudaStream_t) {
  return cudaErrorNotSupported;
}

cudaError_t LaunchSiluMul(Dtype, const void*, void*, int64_t, int64_t,
                          cudaStream_t) {
  return cudaErrorNotSupported;
}

}  // namespace mesa_anyjev::model::kernels::cuda
