// The fused kernels' ATen paths (server/model/kernels/), the reference the
// CUDA kernels are checked against on a GPU (tests/tools/kernel_check.cc),
// held here to float64 written from the definitions
// (tests/tools/kernel_float64.h) within the same bounds, on the CPU, in
// bfloat16 (the GPU's dtype), float16 and float32 (the CPU's, through
// row_norm.h's loop).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "server/model/kernels/qk_norm_rope.h"
#include "server/model/kernels/rms_norm.h"
#include "server/model/kernels/silu_mul.h"
#include "tests/tools/kernel_float64.h"

namespace mesa_anyjev::model::kernels {
namespace {

namespace f64 = kernel_float64;
constexpr double kEps = 1e-6;

// Every element of `got` within units * u(dtype) * scale of `want`.
bool Within(const at::Tensor& got, const at::Tensor& want,
            const at::Tensor& scale, double units) {
  const double u = f64::UnitRoundoff(got.scalar_type());
  const at::Tensor err = (f64::F64(got) - f64::F64(want)).abs();
  const double worst = (err / (units * u * scale)).max().item<double>();
  INFO("worst error over the bound: " << worst);
  return (err <= units * u * scale).all().item<bool>();
}

at::Tensor Randn(at::IntArrayRef sizes, at::ScalarType dtype, double scale) {
  return (at::randn(sizes) * scale).to(dtype);
}

at::Tensor Weight(int64_t n, at::ScalarType dtype) {
  return (at::rand({n}) + 0.5).to(dtype);
}

const auto kDtypes = {at::kBFloat16, at::kHalf, at::kFloat};

TEST_CASE("RMSNorm's ATen path is float64's within the bound", "[kernels]") {
  c10::InferenceMode guard;
  at::manual_seed(1);
  for (const at::ScalarType dtype : kDtypes) {
    INFO(c10::toString(dtype));
    // 2-D rows (row_norm.h's loop in float32) and 3-D heads.
    for (const auto& sizes :
         {std::vector<int64_t>{9, 256}, std::vector<int64_t>{5, 3, 64}}) {
      const at::Tensor x = Randn(sizes, dtype, 4);
      const at::Tensor w = Weight(sizes.back(), dtype);
      const at::Tensor got = RmsNorm(x, w, kEps, /*fused=*/false);
      CHECK(got.scalar_type() == dtype);
      CHECK(got.sizes() == x.sizes());
      const at::Tensor want = f64::RmsNorm(x, w, kEps);
      CHECK(Within(got, want, want.abs(), f64::kNormUnits));
    }
  }
}

TEST_CASE(
    "The residual add is one rounding of the float sum and the norm "
    "reads the rounded sum",
    "[kernels]") {
  c10::InferenceMode guard;
  at::manual_seed(2);
  for (const at::ScalarType dtype : kDtypes) {
    INFO(c10::toString(dtype));
    const at::Tensor x = Randn({7, 128}, dtype, 4);
    const at::Tensor residual = Randn({7, 128}, dtype, 4);
    const at::Tensor w = Weight(128, dtype);
    const at::Tensor sum =
        (x.to(at::kFloat) + residual.to(at::kFloat)).to(dtype);
    const at::Tensor r = residual.clone();
    const at::Tensor got = AddRmsNorm(x, r, w, kEps, /*fused=*/false);
    CHECK(at::equal(r, sum));
    const at::Tensor want = f64::RmsNorm(sum, w, kEps);
    CHECK(Within(got, want, want.abs(), f64::kNormUnits));
    // Into: the same values; without x, no add.
    const at::Tensor r2 = residual.clone();
    const at::Tensor out = at::full({7, 128}, NAN, dtype);
    AddRmsNormInto(x, r2, w, kEps, /*fused=*/false, out);
    CHECK(at::equal(r2, sum));
    CHECK(at::equal(out, got));
    AddRmsNormInto({}, r2, w, kEps, /*fused=*/false, out);
    CHECK(at::equal(r2, sum));
    CHECK(at::equal(out, got));
  }
}

TEST_CASE(
    "q/k norm + rotary's ATen path is float64's within the bound, and "
    "writes the pool at the slots",
    "[kernels]") {
  c10::InferenceMode guard;
  at::manual_seed(3);
  const int64_t n = 6, heads = 4, kv = 2, d = 32, block_tokens = 4;
  const at::Tensor positions = at::randint(40960, {n}, at::kLong);
  const at::Tensor inv_freq =
      1.0 /
      at::pow(1e6, at::arange(0, d, 2, at::kFloat) / static_cast<double>(d));
  for (const at::ScalarType dtype : kDtypes) {
    INFO(c10::toString(dtype));
    const at::Tensor qkv = Randn({n, (heads + 2 * kv) * d}, dtype, 4);
    const at::Tensor q_norm = Weight(d, dtype), k_norm = Weight(d, dtype);
    // A block pool [blocks, block_tokens, kv, D]: slot = block * 4 + offset.
    const at::Tensor keys = at::zeros({5, block_tokens, kv, d}, dtype);
    const at::Tensor values = at::zeros_like(keys);
    const at::Tensor slots =
        at::randperm(5 * block_tokens, at::kLong).narrow(0, 0, n);
    const KvTarget target{slots, keys, values};
    const at::Tensor input = qkv.clone();
    const QkvHeads got =
        QkNormRope(input, heads, kv, q_norm, k_norm, kEps,
                   MakeRotary(positions, inv_freq, dtype, true), &target,
                   /*fused=*/false);
    CHECK(at::equal(input, qkv));  // the ATen path leaves qkv alone
    const at::Tensor q_in = qkv.narrow(1, 0, heads * d).reshape({n, heads, d});
    const at::Tensor k_in =
        qkv.narrow(1, heads * d, kv * d).reshape({n, kv, d});
    CHECK(Within(got.q, f64::NormRope(q_in, q_norm, kEps, positions, inv_freq),
                 f64::NormRopeScale(q_in, q_norm, kEps, positions, inv_freq),
                 f64::kRopeUnits));
    CHECK(Within(got.k, f64::NormRope(k_in, k_norm, kEps, positions, inv_freq),
                 f64::NormRopeScale(k_in, k_norm, kEps, positions, inv_freq),
                 f64::kRopeUnits));
    CHECK(at::equal(
        got.v, qkv.narrow(1, (heads + kv) * d, kv * d).reshape({n, kv, d})));
    const at::Tensor key_rows = keys.view({-1, kv, d});
    const at::Tensor value_rows = values.view({-1, kv, d});
    CHECK(at::equal(key_rows.index_select(0, slots), got.k));
    CHECK(at::equal(value_rows.index_select(0, slots), got.v));
    CHECK(key_rows.abs().sum().item<double>() ==
          key_rows.index_select(0, slots).abs().sum().item<double>());
  }
}

TEST_CASE("SiLU * up's ATen path is float64's within the bound", "[kernels]") {
  c10::InferenceMode guard;
  at::manual_seed(4);
  for (const at::ScalarType dtype : kDtypes) {
    INFO(c10::toString(dtype));
    const at::Tensor gate_up = Randn({5, 2 * 96}, dtype, 3);
    const at::Tensor got = SiluMul(gate_up, /*fused=*/false);
    CHECK(got.sizes() == at::IntArrayRef({5, 96}));
    const at::Tensor want = f64::SiluMul(gate_up);
    CHECK(Within(got, want, want.abs(), f64::kSiluUnits));
    const at::Tensor out = at::full({5, 96}, NAN, dtype);
    SiluMulInto(gate_up, /*fused=*/false, out);
    CHECK(at::equal(out, got));
  }
}

TEST_CASE("The fused path refuses tensors that are not on CUDA", "[kernels]") {
  c10::InferenceMode guard;
  const at::Tensor x = at::randn({2, 64}).to(at::kBFloat16);
  const at::Tensor w = at::ones({64}, at::kBFloat16);
  CHECK_THROWS_WITH(
      AddRmsNorm(x, x.clone(), w, kEps, /*fused=*/true),
      Catch::Contains("add_rms_norm kernel: runs on CUDA, not on cpu"));
  CHECK_THROWS_WITH(SiluMul(at::randn({2, 64}), /*fused=*/true),
                    Catch::Contains("silu_mul kernel: runs on CUDA"));
  const at::Tensor qkv = at::randn({2, 3 * 16});
  CHECK_THROWS_WITH(QkNormRope(qkv, 1, 1, at::ones({16}), at::ones({16}), kEps,
                               MakeRotary(at::zeros({2}, at::kLong),
                                          at::ones({8}), at::kFloat, false),
                               nullptr, /*fused=*/true),
                    Catch::Contains("qk_norm_rope kernel: runs on CUDA"));
}

}  // namespace
}  // namespace mesa_anyjev::model::kernels
