// Device helpers the kernels share: the element types with their float
// conversions (round to nearest even, as ATen's casts), 16-byte packs, and
// sums over a warp and a block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "server/model/kernels/cuda_launch.h"

namespace mesa_anyjev::model::kernels::cuda {

template <typename T>
struct Num;
template <>
struct Num<float> {
  static __device__ float Float(float v) { return v; }
  static __device__ float Round(float v) { return v; }
};
template <>
struct Num<__nv_bfloat16> {
  static __device__ float Float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __nv_bfloat16 Round(float v) {
    return __float2bfloat16_rn(v);
  }
};
template <>
struct Num<__half> {
  static __device__ float Float(__half v) { return __half2float(v); }
  static __device__ __half Round(float v) { return __float2half_rn(v); }
};

// v rounded to T and back: the value ATen holds after a cast to T.
template <typename T>
__device__ float InT(float v) {
  return Num<T>::Float(Num<T>::Round(v));
}

// 16 bytes of T: one vector load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T e[kSize];
};

template <typename T>
__device__ Pack<T> LoadPack(const T* p) {
  const uint4 bits = *reinterpret_cast<const uint4*>(p);
  Pack<T> v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

// One 128-bit store to global memory whatever the compiler makes of the
// pack: NVVM split silu_mul's plain store into four 32-bit ones (PTX
// st.global.v2.u16).
template <typename T>
__device__ void StorePack(T* p, const Pack<T>& v) {
  uint4 bits;
  memcpy(&bits, &v, sizeof(bits));
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(
                   __cvta_generic_to_global(p)),
               "r"(bits.x), "r"(bits.y), "r"(bits.z), "r"(bits.w)
               : "memory");
}

__device__ inline float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The block's total in every thread; blockDim.x a multiple of 32. Once per
// kernel (its shared partials are not reset).
__device__ inline float BlockSum(float v) {
  __shared__ float partial[32];
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x / 32);
  return WarpSum(lane < warps ? partial[lane] : 0.0f);
}

// Calls fn with a T of the dtype (its value unused); the launcher's int.
template <typename Fn>
int WithType(Dtype dtype, Fn&& fn) {
  cudaError_t error = cudaErrorInvalidValue;
  switch (dtype) {
    case Dtype::kFloat32:
      error = fn(float{});
      break;
    case Dtype::kBFloat16:
      error = fn(__nv_bfloat16{});
      break;
    case Dtype::kFloat16:
      error = fn(__half{});
      break;
  }
  return static_cast<int>(error);
}

inline cudaStream_t StreamOf(Stream stream) {
  return static_cast<cudaStream_t>(stream);
}

}  // namespace mesa_anyjev::model::kernels::cuda
