// A call into CUDA outside the seam (server/model/cuda/cuda_calls.h), on
// purpose: tests/e2e/test_build_routes.py links it into the daemon's
// CPU-only link (target cuda_call_outside_seam, never built by `make
// build`) and requires that link to fail, as it would for the same call in
// the product's code. c10_cuda's function is declared here rather than
// through its header, so the probe tests the link alone.
#include <cstdint>

namespace c10::cuda {
int8_t device_count() noexcept;  // c10/cuda/CUDAFunctions.h
}  // namespace c10::cuda

int CudaDevicesOutsideTheSeam() { return c10::cuda::device_count(); }
