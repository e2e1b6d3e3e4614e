#include "server/model/packed_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <string_view>

namespace mesa_anyjev::model {
namespace {

// libtorch registers these in its `mkldnn` operator library (what
// torch.compile's CPU backend calls); they have no at:: function, so they
// are looked up through the dispatcher once.
using ReorderFn = at::Tensor(const at::Tensor&, std::optional<int64_t>);
using LinearFn = at::Tensor(const at::Tensor&, const at::Tensor&,
                            const std::optional<at::Tensor>&, std::string_view,
                            c10::List<std::optional<at::Scalar>>,
                            std::optional<std::string_view>);

struct OneDnnOps {
  c10::TypedOperatorHandle<ReorderFn> reorder;
  c10::TypedOperatorHandle<LinearFn> linear;
};

const OneDnnOps& Ops() {
  static const OneDnnOps ops{
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_reorder_linear_weight", "")
          .typed<ReorderFn>(),
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
          .typed<LinearFn>()};
  return ops;
}

at::Tensor Pack(const at::Tensor& weight) {
  return Ops().reorder.call(weight.contiguous(), std::nullopt);
}

at::Tensor PackedMatmul(const at::Tensor& x, const at::Tensor& packed) {
  return Ops().linear.call(x.contiguous(), packed, std::nullopt, "none",
                           c10::List<std::optional<at::Scalar>>(),
                           std::string_view());
}

// Packed and plain linear on deterministic inputs (2-D and 3-D, odd sizes)
// must agree to float32 rounding; anything else (a missing operator, a
// throw, a mismatch) keeps at::linear.
struct Probe {
  bool works = false;
  std::string why;
};

Probe RunProbe() {
  Probe probe;
  try {
    c10::InferenceMode guard;
    const at::Tensor w =
        at::sin(at::arange(48 * 96, at::kFloat) * 0.37).reshape({48, 96});
    const at::Tensor packed = Pack(w);
    for (const at::Tensor& x :
         {at::cos(at::arange(5 * 96, at::kFloat) * 0.11).reshape({5, 96}),
          at::cos(at::arange(2 * 3 * 96, at::kFloat) * 0.23)
              .reshape({2, 3, 96})}) {
      const at::Tensor want = at::linear(x, w);
      const at::Tensor got = PackedMatmul(x, packed);
      if (got.sizes() != want.sizes()) {
        probe.why = "oneDNN linear returned a different shape";
        return probe;
      }
      const double err = (got - want).abs().max().item<double>();
      if (!(err <= 1e-4)) {
        probe.why =
            "oneDNN linear differs from at::linear by " + std::to_string(err);
        return probe;
      }
    }
    probe.works = true;
  } catch (const std::exception& e) {
    probe.why = std::string("oneDNN linear unavailable: ") + e.what();
    probe.why = probe.why.substr(0, probe.why.find('\n'));
  }
  return probe;
}

}  // namespace

CpuGemm ChooseCpuGemm(const at::Tensor& weight, std::string* why) {
  std::string broken;
  if (!OneDnnLinearWorks(&broken)) {
    *why = broken;
    return CpuGemm::kAten;
  }
  c10::InferenceMode guard;
  const at::Tensor packed = Pack(weight);
  // Seconds of the best of 3 rounds (after one warm-up) of `fn`.
  auto best = [](const auto& fn) {
    double seconds = 1e300;
    for (int r = 0; r < 4; ++r) {
      const auto start = std::chrono::steady_clock::now();
      fn();
      const double s = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      if (r > 0) seconds = std::min(seconds, s);
    }
    return seconds;
  };
  double aten = 0, onednn = 0;
  for (int64_t rows : {int64_t{512}, int64_t{16}}) {
    const at::Tensor x = at::randn({rows, weight.size(1)}, at::kFloat);
    aten += best([&] { (void)at::linear(x, weight); });
    onednn += best([&] { (void)PackedMatmul(x, packed); });
  }
  const CpuGemm choice = onednn <= aten ? CpuGemm::kOneDnn : CpuGemm::kAten;
  *why = "measured " + std::to_string(static_cast<int>(aten * 1e6)) +
         " us at::linear, " + std::to_string(static_cast<int>(onednn * 1e6)) +
         " us oneDNN packed on the model's gate/up projection";
  return choice;
}

bool OneDnnLinearWorks(std::string* why) {
  static const Probe probe = RunProbe();
  if (why != nullptr) *why = probe.why;
  return probe.works;
}

PackedLinear::PackedLinear(const at::Tensor& weight, CpuGemm gemm) {
  if (gemm == CpuGemm::kOneDnn && weight.device().is_cpu() &&
      weight.scalar_type() == at::kFloat && OneDnnLinearWorks()) {
    c10::InferenceMode guard;
    weight_ = Pack(weight);
    packed_ = true;
  } else {
    weight_ = weight;
  }
}

at::Tensor PackedLinear::operator()(const at::Tensor& x) const {
  return packed_ ? PackedMatmul(x, weight_) : at::linear(x, weight_);
}

}  // namespace mesa_anyjev::model
