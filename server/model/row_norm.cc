#include "server/model/row_norm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

namespace mesa_anyjev::model {
namespace {

// Sum of squares in eight lanes, so the compiler may vectorise it without
// reassociating one accumulator.
float SumOfSquares(const float* x, int64_t d) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += x[i + j] * x[i + j];
  }
  float sum = 0;
  for (; i < d; ++i) sum += x[i] * x[i];
  for (float v : lane) sum += v;
  return sum;
}

}  // namespace

bool RowNormApplies(const at::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 &&
         x.stride(2) == 1;
}

at::Tensor RowNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t n = x.size(0), heads = x.size(1), d = x.size(2);
  const int64_t row_stride = x.stride(0), head_stride = x.stride(1);
  const bool rotate = cos.defined();
  TORCH_CHECK(weight.numel() == d && (!rotate || d % 2 == 0),
              "RowNorm: shapes do not match");
  at::Tensor out = at::empty({n, heads, d}, x.options());
  const at::Tensor w = weight.contiguous();
  const at::Tensor c = rotate ? cos.reshape({n, d}).contiguous() : cos;
  const at::Tensor s = rotate ? sin.reshape({n, d}).contiguous() : sin;
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* cp = rotate ? c.data_ptr<float>() : nullptr;
  const float* sp = rotate ? s.data_ptr<float>() : nullptr;
  float* op = out.data_ptr<float>();
  const int64_t half = d / 2;
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> y(static_cast<size_t>(d));
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* row = xp + t * row_stride + h * head_stride;
        float* o = op + (t * heads + h) * d;
        // As transformers: x * rsqrt(mean + eps), then times the weight.
        const float r = static_cast<float>(
            1.0 / std::sqrt(static_cast<double>(SumOfSquares(row, d) /
                                                static_cast<float>(d)) +
                            eps));
        float* dst = rotate ? y.data() : o;
        for (int64_t i = 0; i < d; ++i) dst[i] = wp[i] * (row[i] * r);
        if (!rotate) continue;
        const float* ct = cp + t * d;
        const float* st = sp + t * d;
        for (int64_t i = 0; i < half; ++i) {
          o[i] = y[i] * ct[i] - y[i + half] * st[i];
          o[i + half] = y[i + half] * ct[i + half] + y[i] * st[i + half];
        }
      }
    }
  });
  return out;
}

}  // namespace mesa_anyjev::model
