// SiLU(gate) * up over the gate_up projection's output [rows, 2I] -> [rows,
// I]: each thread reads one 16-byte pack of gate and the matching pack of
// up and writes one pack of the product, so the input is read once and the
// output written once. Rounded as ATen's at::silu(gate).mul_(up): silu in
// float32 as x / (1 + exp(-x)) cast to T, then the product cast to T
// (__fadd_rn: nvcc would otherwise fuse the add into expf's last multiply).
#include <algorithm>

#include "server/model/kernels/cuda_common.cuh"

namespace mesa_anyjev::model::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void SiluMulKernel(const T* __restrict__ gate_up,
                              T* __restrict__ out, int64_t packs_per_row,
                              int64_t packs) {
  constexpr int kPack = Pack<T>::kSize;
  const int64_t inner = packs_per_row * kPack;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       p < packs; p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = p / packs_per_row;
    const int64_t column = (p % packs_per_row) * kPack;
    const T* gate = gate_up + row * 2 * inner + column;
    const Pack<T> g = LoadPack(gate);
    const Pack<T> u = LoadPack(gate + inner);
    Pack<T> o;
#pragma unroll
    for (int i = 0; i < kPack; ++i) {
      const float x = Num<T>::Float(g.e[i]);
      const float silu = InT<T>(x / __fadd_rn(1.0f, expf(-x)));
      o.e[i] = Num<T>::Round(silu * Num<T>::Float(u.e[i]));
    }
    StorePack(out + row * inner + column, o);
  }
}

}  // namespace

int LaunchSiluMul(Dtype dtype, const void* gate_up, void* out, int64_t rows,
                  int64_t inner, Stream stream) {
  return WithType(dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t packs_per_row = inner / Pack<T>::kSize;
    const int64_t packs = rows * packs_per_row;
    // A grid-stride loop past 2^20 blocks (2^28 packs: 4 G elements).
    const int64_t blocks =
        std::min<int64_t>((packs + kThreads - 1) / kThreads, int64_t{1} << 20);
    SiluMulKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0,
                       StreamOf(stream)>>>(
        static_cast<const T*>(gate_up), static_cast<T*>(out), packs_per_row,
        packs);
    return cudaGetLastError();
  });
}

}  // namespace mesa_anyjev::model::kernels::cuda
