// q/k per-head RMSNorm + rotary embedding, in place in the qkv projection's
// output, optionally writing k and v into the KV pool. One block per token:
// its threads first put the token's cos and sin (rounded to T, as the
// model's tables are) in shared memory, then each warp takes heads in turn
// (q heads, k heads, then v heads when the pool is written). A lane holds
// elements j and j + D/2 for j = lane, lane + 32, ...: the pairs that
// rotate_half mixes, so a head is read once and written once.
//
// Every rounding of the ATen composition is kept: the norm as
// transformers' Qwen3RMSNorm (float32 statistics, T(x * r), then times the
// weight in T), then q * cos and rotate_half(q) * sin each rounded to T and
// their sum rounded to T. __fmul_rn/__fadd_rn keep nvcc from contracting
// them into an FMA, which would round once where ATen rounds twice.
#include "server/model/kernels/cuda_common.cuh"

namespace mesa_anyjev::model::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int kPairs>
__global__ void QkNormRopeKernel(QkNormRopeArgs a) {
  __shared__ float table[2 * 32 * kPairs];  // cos[half], then sin[half]
  const int half = static_cast<int>(a.head_dim / 2);
  const int d = static_cast<int>(a.head_dim);
  const int64_t t = blockIdx.x;
  // As the model: positions.to(float) * inv_freq, cos and sin in float32,
  // then cast to T.
  const float position = static_cast<float>(a.positions[t]);
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    const float angle = __fmul_rn(position, a.inv_freq[j]);
    table[j] = InT<T>(cosf(angle));
    table[half + j] = InT<T>(sinf(angle));
  }
  __syncthreads();

  T* row = static_cast<T*>(a.qkv) + t * a.row_stride;
  const int64_t slot = a.slots != nullptr ? a.slots[t] : -1;
  const bool write = slot >= 0 && slot < a.pool_slots;
  const int heads = static_cast<int>(a.heads);
  const int kv = static_cast<int>(a.kv_heads);
  const int units = heads + kv + (write ? kv : 0);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int u = static_cast<int>(threadIdx.x / 32); u < units;
       u += static_cast<int>(blockDim.x / 32)) {
    T* head = row + static_cast<int64_t>(u) * d;
    if (u >= heads + kv) {  // a v head: into the pool as it is
      T* dst = static_cast<T*>(a.values) + (slot * kv + (u - heads - kv)) * d;
      for (int i = lane; i < d; i += 32) dst[i] = head[i];
      continue;
    }
    const T* w = static_cast<const T*>(u < heads ? a.q_weight : a.k_weight);
    T* key = u >= heads && write
                 ? static_cast<T*>(a.keys) + (slot * kv + (u - heads)) * d
                 : nullptr;
    float lo[kPairs], hi[kPairs];
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const int j = lane + 32 * k;
      lo[k] = j < half ? Num<T>::Float(head[j]) : 0.0f;
      hi[k] = j < half ? Num<T>::Float(head[j + half]) : 0.0f;
      squares += lo[k] * lo[k] + hi[k] * hi[k];
    }
    const float inv = rsqrtf(WarpSum(squares) / static_cast<float>(d) + a.eps);
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const int j = lane + 32 * k;
      if (j >= half) continue;
      const float x = InT<T>(InT<T>(lo[k] * inv) * Num<T>::Float(w[j]));
      const float y = InT<T>(InT<T>(hi[k] * inv) * Num<T>::Float(w[j + half]));
      const float c = table[j], s = table[half + j];
      // rotate_half: [-y, x] against [x, y].
      const T first = Num<T>::Round(
          __fadd_rn(InT<T>(__fmul_rn(x, c)), InT<T>(__fmul_rn(-y, s))));
      const T second = Num<T>::Round(
          __fadd_rn(InT<T>(__fmul_rn(y, c)), InT<T>(__fmul_rn(x, s))));
      head[j] = first;
      head[j + half] = second;
      if (key != nullptr) {
        key[j] = first;
        key[j + half] = second;
      }
    }
  }
}

template <typename T, int kPairs>
cudaError_t Launch(const QkNormRopeArgs& args, cudaStream_t stream) {
  QkNormRopeKernel<T, kPairs>
      <<<static_cast<unsigned>(args.tokens), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace

int LaunchQkNormRope(Dtype dtype, const QkNormRopeArgs& args, Stream stream) {
  return WithType(dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t half = args.head_dim / 2;
    if (half <= 32) return Launch<T, 1>(args, StreamOf(stream));
    if (half <= 64) return Launch<T, 2>(args, StreamOf(stream));
    if (half <= 128) return Launch<T, 4>(args, StreamOf(stream));
    return cudaErrorInvalidValue;
  });
}

}  // namespace mesa_anyjev::model::kernels::cuda
