// A call into CUDA outside the seam (server/model/cuda/cuda_calls.h), on
// purpose: tests/e2e/test_build_routes.py links it into the daemon's
// CPU-only link (target cuda_call_outside_seam, never built by `make
// build`) and requires that link to fail, as it would for the same call in
// the product's code.
#include <c10/cuda/CUDAFunctions.h>

int CudaDevicesOutsideTheSeam() { return c10::cuda::device_count(); }
