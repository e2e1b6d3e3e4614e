// The seam between the kernels' ATen side (the .cc files: checks, streams,
// the ATen reference paths) and their CUDA side (the .cu files): raw
// pointers and sizes only, so nvcc never parses libtorch's headers (seconds
// per file instead of minutes on two cores) and the .cu files carry no C++
// ABI. Each launcher returns the launch's error (cudaGetLastError, as an
// int: 0 is success) and takes its stream as the cudaStream_t it is, so no
// CUDA header is needed to call one. Part of the CUDA seam
// (server/model/cuda/cuda_calls.h): a build without the CUDA libraries links
// the twin in server/model/cuda/no_cuda.cc.
#pragma once

#include <cstdint>

namespace mesa_anyjev::model::kernels::cuda {

enum class Dtype { kFloat32, kBFloat16, kFloat16 };

// Whether this binary links the .cu files (resolve.cc).
bool KernelsBuilt();

// A cudaStream_t.
using Stream = void*;

// Contiguous rows of `h`: residual += x (x null: no add, residual read
// only), then out = RMSNorm(residual) * weight, rounded as
// transformers' Qwen3RMSNorm does. h * element size is a multiple of 16,
// every pointer 16-byte aligned, h * element size <= 40 KiB.
int LaunchAddRmsNorm(Dtype dtype, const void* x, void* residual,
                     const void* weight, void* out, int64_t rows, int64_t h,
                     float eps, Stream stream);

struct QkNormRopeArgs {
  void* qkv = nullptr;  // [tokens, row_stride]: q heads, k heads, v heads
  int64_t tokens = 0;
  int64_t row_stride = 0;                         // elements
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // head_dim even, <= 256
  const void* q_weight = nullptr;                 // [head_dim]
  const void* k_weight = nullptr;                 // [head_dim]
  float eps = 0;
  const int64_t* positions = nullptr;  // [tokens]
  const float* inv_freq = nullptr;     // [head_dim / 2]
  // The KV write (slots null: none): token t's k and v heads to
  // keys/values[slots[t], kv_heads, head_dim]; slots outside
  // [0, pool_slots) are skipped.
  const int64_t* slots = nullptr;
  void* keys = nullptr;
  void* values = nullptr;
  int64_t pool_slots = 0;
};
int LaunchQkNormRope(Dtype dtype, const QkNormRopeArgs& args, Stream stream);

// gate_up [rows, 2 * inner] -> out [rows, inner], both contiguous, 16-byte
// aligned, inner * element size a multiple of 16.
int LaunchSiluMul(Dtype dtype, const void* gate_up, void* out, int64_t rows,
                  int64_t inner, Stream stream);

}  // namespace mesa_anyjev::model::kernels::cuda
