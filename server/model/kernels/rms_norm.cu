// Residual add + RMSNorm, one block per row: each thread adds its 16-byte
// packs of x into the residual (rounded to T, as ATen's add_), writes them
// back and stages them in shared memory while summing their squares in
// float32; after the block's sum, out = T(T(r * rsqrt(mean + eps)) * w),
// transformers' Qwen3RMSNorm order. So x and the residual are read once and
// the residual and out written once.
#include <algorithm>

#include "server/model/kernels/cuda_common.cuh"

namespace mesa_anyjev::model::kernels::cuda {
namespace {

template <typename T>
__global__ void AddRmsNormKernel(const T* __restrict__ x,
                                 T* __restrict__ residual,
                                 const T* __restrict__ weight,
                                 T* __restrict__ out, int h, float eps) {
  // The row after the add (bytes: one extern array serves every T).
  extern __shared__ __align__(16) unsigned char shared_row[];
  Pack<T>* staged = reinterpret_cast<Pack<T>*>(shared_row);
  constexpr int kPack = Pack<T>::kSize;
  const int packs = h / kPack;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * h;
  float squares = 0.0f;
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    Pack<T> r = LoadPack(residual + base + p * kPack);
    if (x != nullptr) {
      const Pack<T> a = LoadPack(x + base + p * kPack);
#pragma unroll
      for (int i = 0; i < kPack; ++i) {
        r.e[i] = Num<T>::Round(Num<T>::Float(r.e[i]) + Num<T>::Float(a.e[i]));
      }
      StorePack(residual + base + p * kPack, r);
    }
    staged[p] = r;
#pragma unroll
    for (int i = 0; i < kPack; ++i) {
      const float v = Num<T>::Float(r.e[i]);
      squares += v * v;
    }
  }
  const float inv = rsqrtf(BlockSum(squares) / static_cast<float>(h) + eps);
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<T> r = staged[p];
    const Pack<T> w = LoadPack(weight + p * kPack);
    Pack<T> o;
#pragma unroll
    for (int i = 0; i < kPack; ++i) {
      o.e[i] = Num<T>::Round(InT<T>(Num<T>::Float(r.e[i]) * inv) *
                             Num<T>::Float(w.e[i]));
    }
    StorePack(out + base + p * kPack, o);
  }
}

}  // namespace

int LaunchAddRmsNorm(Dtype dtype, const void* x, void* residual,
                     const void* weight, void* out, int64_t rows, int64_t h,
                     float eps, Stream stream) {
  return WithType(dtype, [&](auto t) {
    using T = decltype(t);
    const int packs = static_cast<int>(h / Pack<T>::kSize);
    // One pack a thread where the row allows (H = 4096 in bf16: 512).
    const int threads = std::min(1024, std::max(32, (packs + 31) / 32 * 32));
    const size_t shared = static_cast<size_t>(packs) * sizeof(Pack<T>);
    AddRmsNormKernel<T>
        <<<static_cast<unsigned>(rows), threads, shared, StreamOf(stream)>>>(
            static_cast<const T*>(x), static_cast<T*>(residual),
            static_cast<const T*>(weight), static_cast<T*>(out),
            static_cast<int>(h), eps);
    return cudaGetLastError();
  });
}

}  // namespace mesa_anyjev::model::kernels::cuda
