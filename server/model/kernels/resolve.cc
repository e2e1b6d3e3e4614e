#include "server/model/kernels/resolve.h"

#include "server/model/kernels/cuda_launch.h"

namespace mesa_anyjev::model::kernels {

config::KernelSet ResolveKernels(const config::KernelSet& asked,
                                 const c10::Device& device, std::string* note) {
  return config::ResolveKernelSet(asked, device.is_cuda(), cuda::KernelsBuilt(),
                                  note);
}

}  // namespace mesa_anyjev::model::kernels
