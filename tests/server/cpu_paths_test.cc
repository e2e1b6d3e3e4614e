// The CPU-specific paths' choices (server/model/cpu_paths.h, the fused
// norms, the packed-GEMM probe and cpu_gemm auto), each against what it
// must agree with. `make check-arm64` runs this binary on aarch64 under
// qemu-user as well, so a path that does not work there fails here.
#include "server/model/cpu_paths.h"

#include <ATen/ATen.h>
#include <malloc.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "server/model/packed_linear.h"
#include "server/model/row_norm.h"

namespace mesa_anyjev::model {
namespace {

TEST_CASE("Fused norms take CPU float32 rows of unit stride, nothing else",
          "[engine]") {
  const at::Tensor rows = at::randn({4, 6, 32});  // [N, H, D]
  CHECK(model::RowNormApplies(rows));
  // q's heads as a view of the fused q/k/v projection's output.
  CHECK(model::RowNormApplies(
      at::randn({4, 10 * 32}).narrow(1, 0, 6 * 32).view({4, 6, 32})));
  CHECK_FALSE(model::RowNormApplies(rows.to(at::kBFloat16)));
  CHECK_FALSE(model::RowNormApplies(rows.to(at::kDouble)));
  CHECK_FALSE(model::RowNormApplies(rows.transpose(1, 2)));
  CHECK_FALSE(model::RowNormApplies(rows.reshape({24, 32})));
}

TEST_CASE("Fused norms equal the ATen composition", "[engine]") {
  at::manual_seed(7);
  const int64_t n = 5, heads = 3, d = 36;  // d not a multiple of 8
  // A strided view, as the projections hand q and k over.
  const at::Tensor x = at::randn({n, (heads + 2) * d})
                           .narrow(1, d, heads * d)
                           .view({n, heads, d});
  const at::Tensor w = at::randn({d});
  const at::Tensor cos = at::randn({n, 1, d}), sin = at::randn({n, 1, d});
  const double eps = 1e-6;
  const at::Tensor y = x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
  const at::Tensor rotated =
      at::cat({-y.slice(-1, d / 2), y.slice(-1, 0, d / 2)}, -1);
  CHECK(at::allclose(model::RowNorm(x, w, eps, at::Tensor(), at::Tensor()), y,
                     1e-5, 1e-6));
  CHECK(at::allclose(model::RowNorm(x, w, eps, cos, sin),
                     y * cos + rotated * sin, 1e-5, 1e-6));
}

TEST_CASE("The packed-GEMM probe, its fallback and auto agree with at::linear",
          "[engine]") {
  at::manual_seed(3);
  const at::Tensor w = at::randn({96, 64});
  const at::Tensor x = at::randn({7, 64});
  std::string why;
  const bool works = model::OneDnnLinearWorks(&why);
  INFO("oneDNN packed linear: " << (works ? "works" : why));
  // Where the probe fails, why says so, and the layer stays on at::linear.
  CHECK(works == why.empty());
  const model::PackedLinear onednn(w, model::CpuGemm::kOneDnn);
  const model::PackedLinear aten(w, model::CpuGemm::kAten);
  CHECK(onednn.packed() == works);
  CHECK_FALSE(aten.packed());
  CHECK(at::allclose(onednn(x), at::linear(x, w), 1e-4, 1e-5));
  CHECK(at::allclose(aten(x), at::linear(x, w), 0, 0));
  // auto: one of the two, measured where oneDNN works, else the probe's why.
  std::string measured;
  const model::CpuGemm chosen = model::ChooseCpuGemm(w, &measured);
  INFO("cpu_gemm auto: " << model::CpuGemmName(chosen) << ", " << measured);
  if (works) {
    CHECK(
        (chosen == model::CpuGemm::kOneDnn || chosen == model::CpuGemm::kAten));
    CHECK(measured.rfind("measured ", 0) == 0);
  } else {
    CHECK(chosen == model::CpuGemm::kAten);
    CHECK(measured == why);
  }
}

TEST_CASE("The CPU paths follow the model's dtype, attention and settings",
          "[engine]") {
  const at::TensorOptions f32 = at::TensorOptions(at::kFloat);
  CpuPaths paths =
      ChooseCpuPaths(f32, model::Attention::kEager, 128, true, 2 << 20);
  CHECK(paths.fused_norms);
  CHECK_FALSE(paths.flash_attention);
  CHECK(DescribeCpuPaths(paths) ==
        "norms fused (row_norm), attention eager (ATen), heap kept (mallopt), "
        "host block cache 2097152 bytes");
  paths = ChooseCpuPaths(f32.dtype(at::kBFloat16), model::Attention::kSdpa, 128,
                         false, 0);
  CHECK_FALSE(paths.fused_norms);
  CHECK(paths.flash_attention);
  CHECK(DescribeCpuPaths(paths) ==
        "norms ATen, attention flash (CPU kernel), heap glibc defaults "
        "(mallopt not taken), host block cache off");
}

TEST_CASE("KeepFreedHeap keeps a large block out of mmap", "[engine]") {
  // 64 MiB is over glibc's largest mmap threshold (32 MiB): without the
  // setting, malloc maps it and mallinfo2 counts it in hblkhd.
  REQUIRE(KeepFreedHeap());
  const size_t mapped = mallinfo2().hblkhd;
  void* block = std::malloc(size_t{64} << 20);
  REQUIRE(block != nullptr);
  CHECK(mallinfo2().hblkhd == mapped);
  std::free(block);
}

}  // namespace
}  // namespace mesa_anyjev::model
