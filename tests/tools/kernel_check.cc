// Test tool: our fused kernels (server/model/kernels/) on a device against
// their CPU reference (the ATen path on the CPU), then timed against the
// ATen path on the same device. Prints one JSON report; the GPU check runs
// it (tests/gpu/gpu_check.py, section "kernels"), and ctest runs it on the
// CPU, where the fused path falls back to the ATen one, so everything but
// the kernels themselves is exercised before a GPU is at hand.
//
//   kernel_check [--device cuda] [--dtype bfloat16] [--tokens 64,8192]
//                [--kernels fused] [--repeats 10] [--warmup 3] [--seed 0]
//                [--no-bench] [--inject-error KERNEL]
//
// Parity: fresh random inputs at Qwen3-8B's shapes (and a tiny shape with an
// odd token count, parity only), outputs filled with NaN first, each
// element held to the bound of tests/tools/kernel_float64.h; the KV pool's
// rows the pass does not own must stay NaN. Timing: device events (a clock
// on the CPU) around each call, after a warm-up, fresh inputs each repeat,
// the two paths interleaved; the median, min and max, the bytes the fused
// kernel moves and the rate each path achieves over them.
// --inject-error KERNEL spoils one element of that kernel's output, to show
// the check fails. Exit 0 all parity within bounds, 1 not, 2 usage.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config/kernel_set.h"
#include "server/model/cuda/cuda_calls.h"
#include "server/model/kernels/qk_norm_rope.h"
#include "server/model/kernels/resolve.h"
#include "server/model/kernels/rms_norm.h"
#include "server/model/kernels/silu_mul.h"
#include "tests/tools/kernel_float64.h"

namespace {

namespace kernels = mesa_anyjev::model::kernels;
namespace model = mesa_anyjev::model;
namespace f64 = mesa_anyjev::kernel_float64;
using nlohmann::json;

struct Shape {
  const char* name;
  int64_t hidden, heads, kv_heads, head_dim, inner;
  bool bench;
};
// Qwen3-8B, and a tiny one with a head_dim of 16 (the GPU check's tiny
// models) whose parity runs at an odd token count.
constexpr Shape kQwen3_8B{"qwen3-8b", 4096, 32, 8, 128, 12288, true};
constexpr Shape kTiny{"tiny", 128, 8, 2, 16, 384, false};
constexpr int64_t kTinyTokens = 7;
constexpr double kEps = 1e-6;
constexpr double kRopeTheta = 1e6;
constexpr int64_t kMaxPosition = 40960;

struct Options {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kBFloat16;
  std::vector<int64_t> tokens;
  mesa_anyjev::config::KernelSet kernels;
  int repeats = 10, warmup = 3;
  bool bench = true;
  std::string inject;
};

// ---------------------------------------------------------------------------
// Comparison

// One output against its reference, element by element: |got - want| <=
// tolerance (NaN fails).
json Compare(const at::Tensor& got, const at::Tensor& want,
             const at::Tensor& tolerance) {
  const at::Device device = got.device();
  const at::Tensor g = f64::F64(got), w = f64::F64(want.to(device));
  const at::Tensor err = (g - w).abs();
  const at::Tensor tol = tolerance.defined() ? f64::F64(tolerance.to(device))
                                             : at::zeros_like(err);
  const at::Tensor over = at::where(
      tol > 0, err / tol,
      at::where(err > 0, std::numeric_limits<double>::infinity(), 0.0));
  const at::Tensor floor = at::full_like(w, 1e-30);
  const double nan = g.isnan().sum().item<double>();
  return {{"elements", g.numel()},
          {"max_abs", g.numel() ? err.max().item<double>() : 0.0},
          {"max_rel",
           g.numel() ? (err / at::maximum(w.abs(), floor)).max().item<double>()
                     : 0.0},
          {"worst_vs_bound", g.numel() ? over.max().item<double>() : 0.0},
          {"differing", (err > 0).sum().item<int64_t>()},
          {"nan", static_cast<int64_t>(nan)},
          {"ok", nan == 0 && (err <= tol).all().item<bool>()}};
}

bool AllOk(const json& outputs) {
  return std::all_of(outputs.begin(), outputs.end(),
                     [](const json& o) { return o.at("ok").get<bool>(); });
}

// One element (the middle of each axis) made wrong, in place (a view of
// any layout).
void Spoil(const at::Tensor& t) {
  at::Tensor element = t;
  while (element.dim() > 0) element = element.select(0, element.size(0) / 2);
  element.mul_(1.5).add_(1.0);
}

// A copy on the device, even where the tensor is there already (the checks
// write in place).
at::Tensor On(const at::Tensor& t, const Options& o) {
  return t.to(o.device, t.scalar_type(), /*non_blocking=*/false,
              /*copy=*/true);
}

at::Tensor Poisoned(at::IntArrayRef sizes, const Options& o) {
  return at::full(sizes, std::numeric_limits<double>::quiet_NaN(),
                  at::TensorOptions().dtype(o.dtype).device(o.device));
}

// ---------------------------------------------------------------------------
// Timing

void Synchronize(const at::Device& device) {
  if (device.is_cuda()) model::cuda::Synchronize(device.index());
}

// Milliseconds one call takes: device events on CUDA, a clock on the CPU.
double TimeMs(const at::Device& device, const std::function<void()>& call) {
  Synchronize(device);
  if (!device.is_cuda()) {
    const auto start = std::chrono::steady_clock::now();
    call();
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
        .count();
  }
  return model::cuda::EventMilliseconds(device.index(), call);
}

json Spread(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  return {{"median", median}, {"min", ms.front()}, {"max", ms.back()}};
}

// Times `call(path, repeat)` for the fused (when `fused`) and the ATen path,
// interleaved; `call` runs on the inputs of its (path, repeat), made fresh
// for each beforehand by `prepare(path, repeat)`.
json Bench(const Options& o, bool fused, double bytes,
           const std::function<void(int, int)>& prepare,
           const std::function<void(int, int)>& call) {
  const int calls = o.warmup + o.repeats;
  for (int path = 0; path < 2; ++path) {
    for (int r = 0; r < calls; ++r) prepare(path, r);
  }
  std::vector<double> ms[2];
  for (int r = 0; r < calls; ++r) {
    for (int path = 0; path < 2; ++path) {
      const double t = TimeMs(o.device, [&] { call(path, r); });
      if (r >= o.warmup) ms[path].push_back(t);
    }
  }
  const json ours = Spread(ms[0]), aten = Spread(ms[1]);
  const double ours_s = ours["median"].get<double>() / 1e3;
  const double aten_s = aten["median"].get<double>() / 1e3;
  return {{"path", fused ? "fused" : "aten"},
          {"bytes", bytes},
          {"ms", ours},
          {"aten_ms", aten},
          {"gb_per_s", bytes / ours_s / 1e9},
          {"aten_gb_per_s", bytes / aten_s / 1e9},
          {"speedup_vs_aten", aten_s / ours_s},
          {"repeats", o.repeats},
          {"warmup", o.warmup}};
}

// Inputs are made on the device (fast at the 8B shapes) and copied to the
// CPU for the reference; the comparisons and bounds run on the device in
// float64 with the reference's values copied there.
at::Tensor Randn(at::IntArrayRef sizes, const Options& o, double scale) {
  return (at::randn(sizes, at::TensorOptions().device(o.device)) * scale)
      .to(o.dtype);
}

at::Tensor NormWeight(int64_t n, const Options& o) {
  return (at::rand({n}, at::TensorOptions().device(o.device)) + 0.5)
      .to(o.dtype);
}

at::Tensor Cpu(const at::Tensor& t) {
  return t.to(at::kCPU, t.scalar_type(), /*non_blocking=*/false,
              /*copy=*/true);
}

// `units`: the kernel's bound in units of the dtype's rounding error.
json Report(const char* kernel, const Shape& s, int64_t n, bool fused,
            double units, const json& outputs) {
  return {{"kernel", kernel},     {"shape", s.name},
          {"tokens", n},          {"path", fused ? "fused" : "aten"},
          {"bound_units", units}, {"outputs", outputs},
          {"ok", AllOk(outputs)}};
}

// ---------------------------------------------------------------------------
// The kernels

json AddRmsNormCheck(const Options& o, const Shape& s, int64_t n) {
  const bool fused = o.kernels.add_rms_norm;
  const at::Tensor x = Randn({n, s.hidden}, o, 4.0);
  const at::Tensor residual = Randn({n, s.hidden}, o, 4.0);
  const at::Tensor w = NormWeight(s.hidden, o);
  // The CPU reference; the bound from the residual it computed.
  const at::Tensor want_residual = Cpu(residual);
  const at::Tensor want =
      kernels::AddRmsNorm(Cpu(x), want_residual, Cpu(w), kEps, false);
  const at::Tensor tolerance =
      f64::kNormUnits * f64::UnitRoundoff(o.dtype) *
      f64::RmsNorm(On(want_residual, o), w, kEps).abs();
  // On the device, into a poisoned output.
  const at::Tensor got_residual = On(residual, o);
  const at::Tensor got = Poisoned({n, s.hidden}, o);
  kernels::AddRmsNormInto(x, got_residual, w, kEps, fused, got);
  if (o.inject == "add_rms_norm") Spoil(got);
  json report = Report("add_rms_norm", s, n, fused, f64::kNormUnits,
                       {{"residual", Compare(got_residual, want_residual, {})},
                        {"out", Compare(got, want, tolerance)}});
  if (!o.device.is_cpu()) {  // the ATen path on the device, as a yardstick
    const at::Tensor r = On(residual, o);
    const at::Tensor a = kernels::AddRmsNorm(x, r, w, kEps, false);
    report["aten_on_device"] = {{"residual", Compare(r, want_residual, {})},
                                {"out", Compare(a, want, tolerance)}};
  }
  if (o.bench && s.bench) {
    std::vector<at::Tensor> xs[2], rs[2];
    report["bench"] = Bench(
        o, fused, 4.0 * n * s.hidden * c10::elementSize(o.dtype),
        [&](int p, int) {
          xs[p].push_back(Randn({n, s.hidden}, o, 4.0));
          rs[p].push_back(Randn({n, s.hidden}, o, 4.0));
        },
        [&](int p, int r) {
          kernels::AddRmsNorm(xs[p][r], rs[p][r], w, kEps, p == 0 && fused);
        });
  }
  return report;
}

json QkNormRopeCheck(const Options& o, const Shape& s, int64_t n) {
  const bool fused = o.kernels.qk_norm_rope;
  const int64_t d = s.head_dim, kv = s.kv_heads;
  const int64_t width = (s.heads + 2 * kv) * d;
  const at::TensorOptions longs = at::TensorOptions(at::kLong).device(o.device);
  const at::Tensor qkv = Randn({n, width}, o, 4.0);
  const at::Tensor q_norm = NormWeight(d, o), k_norm = NormWeight(d, o);
  const at::Tensor positions = at::randint(kMaxPosition, {n}, longs);
  // As the model makes it, on its device.
  const at::Tensor inv_freq =
      1.0 / at::pow(kRopeTheta,
                    at::arange(0, d, 2,
                               at::TensorOptions(at::kFloat).device(o.device)) /
                        static_cast<double>(d));
  // The CPU reference.
  const kernels::QkvHeads want = kernels::QkNormRope(
      Cpu(qkv), s.heads, kv, Cpu(q_norm), Cpu(k_norm), kEps,
      kernels::MakeRotary(Cpu(positions), Cpu(inv_freq), o.dtype, true),
      nullptr, false);
  const double units = f64::kRopeUnits * f64::UnitRoundoff(o.dtype);
  const at::Tensor q_tolerance =
      units *
      f64::NormRopeScale(qkv.narrow(1, 0, s.heads * d).reshape({n, s.heads, d}),
                         q_norm, kEps, positions, inv_freq);
  const at::Tensor k_tolerance =
      units *
      f64::NormRopeScale(qkv.narrow(1, s.heads * d, kv * d).reshape({n, kv, d}),
                         k_norm, kEps, positions, inv_freq);
  // On the device, with a poisoned pool of more slots than tokens.
  const int64_t pool_slots = 2 * n + 3;
  const at::Tensor slots = at::randperm(pool_slots, longs).narrow(0, 0, n);
  const kernels::KvTarget target{slots, Poisoned({pool_slots, kv, d}, o),
                                 Poisoned({pool_slots, kv, d}, o)};
  const kernels::QkvHeads got = kernels::QkNormRope(
      On(qkv, o), s.heads, kv, q_norm, k_norm, kEps,
      kernels::MakeRotary(positions, inv_freq, o.dtype, !fused), &target,
      fused);
  if (o.inject == "qk_norm_rope") Spoil(got.q);
  const at::Tensor others = at::ones({pool_slots}, longs.dtype(at::kBool))
                                .index_fill_(0, slots, false);
  const auto untouched = [&](const at::Tensor& pool) {
    const at::Tensor rows = pool.index({others});
    return json{{"rows", rows.size(0)},
                {"not_nan", (~rows.isnan()).sum().item<int64_t>()},
                {"ok", rows.isnan().all().item<bool>()}};
  };
  json report =
      Report("qk_norm_rope", s, n, fused, f64::kRopeUnits,
             {{"q", Compare(got.q, want.q, q_tolerance)},
              {"k", Compare(got.k, want.k, k_tolerance)},
              {"v", Compare(got.v, want.v, {})},
              {"keys_at_slots",
               Compare(target.keys.index_select(0, slots), got.k, {})},
              {"values_at_slots",
               Compare(target.values.index_select(0, slots), got.v, {})},
              {"keys_elsewhere", untouched(target.keys)},
              {"values_elsewhere", untouched(target.values)}});
  if (!o.device.is_cpu()) {
    const kernels::QkvHeads a = kernels::QkNormRope(
        qkv, s.heads, kv, q_norm, k_norm, kEps,
        kernels::MakeRotary(positions, inv_freq, o.dtype, true), nullptr,
        false);
    report["aten_on_device"] = {{"q", Compare(a.q, want.q, q_tolerance)},
                                {"k", Compare(a.k, want.k, k_tolerance)}};
  }
  if (o.bench && s.bench) {
    std::vector<at::Tensor> qkvs[2];
    std::vector<kernels::KvTarget> targets[2];
    std::vector<kernels::Rotary> rotaries[2];
    // Read q, k and v; write q and k, and k and v into the pool.
    const double bytes = static_cast<double>(n) * c10::elementSize(o.dtype) *
                         ((s.heads + 2 * kv) * d + (s.heads + 3 * kv) * d);
    report["bench"] = Bench(
        o, fused, bytes,
        [&](int p, int) {
          qkvs[p].push_back(Randn({n, width}, o, 4.0));
          targets[p].push_back({at::randperm(pool_slots, longs).narrow(0, 0, n),
                                Poisoned({pool_slots, kv, d}, o),
                                Poisoned({pool_slots, kv, d}, o)});
          // The tables are made once a pass, outside the timed call.
          rotaries[p].push_back(
              kernels::MakeRotary(at::randint(kMaxPosition, {n}, longs),
                                  inv_freq, o.dtype, !(p == 0 && fused)));
        },
        [&](int p, int r) {
          kernels::QkNormRope(qkvs[p][r], s.heads, kv, q_norm, k_norm, kEps,
                              rotaries[p][r], &targets[p][r], p == 0 && fused);
        });
  }
  return report;
}

json SiluMulCheck(const Options& o, const Shape& s, int64_t n) {
  const bool fused = o.kernels.silu_mul;
  const at::Tensor gate_up = Randn({n, 2 * s.inner}, o, 3.0);
  const at::Tensor want = kernels::SiluMul(Cpu(gate_up), false);
  const at::Tensor tolerance = f64::kSiluUnits * f64::UnitRoundoff(o.dtype) *
                               f64::SiluMul(gate_up).abs();
  const at::Tensor got = Poisoned({n, s.inner}, o);
  kernels::SiluMulInto(gate_up, fused, got);
  if (o.inject == "silu_mul") Spoil(got);
  json report = Report("silu_mul", s, n, fused, f64::kSiluUnits,
                       {{"out", Compare(got, want, tolerance)}});
  if (!o.device.is_cpu()) {
    report["aten_on_device"] = {
        {"out", Compare(kernels::SiluMul(gate_up, false), want, tolerance)}};
  }
  if (o.bench && s.bench) {
    std::vector<at::Tensor> inputs[2];
    report["bench"] = Bench(
        o, fused, 3.0 * n * s.inner * c10::elementSize(o.dtype),
        [&](int p, int) {
          inputs[p].push_back(Randn({n, 2 * s.inner}, o, 3.0));
        },
        [&](int p, int r) { kernels::SiluMul(inputs[p][r], p == 0 && fused); });
  }
  return report;
}

// ---------------------------------------------------------------------------

std::string DeviceName(const at::Device& device) {
  if (!device.is_cuda()) return "cpu";
  const auto props = model::cuda::ReadProperties(device.index());
  if (!props.ok()) return std::string(props.status().message());
  return props->name + " (compute capability " + std::to_string(props->major) +
         "." + std::to_string(props->minor) + ")";
}

int Run(const Options& o) {
  json results = json::array();
  bool ok = true;
  std::vector<std::pair<const Shape*, int64_t>> cases;
  for (int64_t n : o.tokens) cases.emplace_back(&kQwen3_8B, n);
  cases.emplace_back(&kTiny, kTinyTokens);
  for (const auto& [shape, n] : cases) {
    for (const auto& check : {AddRmsNormCheck, QkNormRopeCheck, SiluMulCheck}) {
      const auto start = std::chrono::steady_clock::now();
      json r = check(o, *shape, n);
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      r["seconds"] = seconds;
      ok = ok && r.at("ok").get<bool>();
      std::cerr << "kernel_check: " << r.at("kernel").get<std::string>() << " "
                << shape->name << " N=" << n
                << (r.at("ok").get<bool>() ? " ok" : " FAILED") << " ("
                << seconds << " s)\n";
      results.push_back(std::move(r));
    }
  }
  // Each output's bound: |got - reference| <= bound_units * unit_roundoff
  // * the magnitude of the terms it is made of (docs/model.md); residual,
  // v and the pool's rows: equal.
  const json report = {{"device", DeviceName(o.device)},
                       {"torch", TORCH_VERSION},
                       {"dtype", c10::toString(o.dtype)},
                       {"unit_roundoff", f64::UnitRoundoff(o.dtype)},
                       {"kernels", o.kernels.ToString()},
                       {"eps", kEps},
                       {"results", results},
                       {"ok", ok}};
  std::cout << report.dump(1) << std::endl;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fused kernels against their CPU reference, then timed"};
  std::string device = "cpu", dtype = "bfloat16", kernel_list = "fused";
  std::vector<int64_t> tokens = {64, 8192};
  Options o;
  int64_t seed = 0;
  bool no_bench = false;
  app.add_option("--device", device, "cpu | cuda | cuda:N");
  app.add_option("--dtype", dtype)
      ->check(CLI::IsMember({"bfloat16", "float16", "float32"}));
  app.add_option("--tokens", tokens, "rows of the Qwen3-8B-shaped cases")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--kernels", kernel_list, "as model.kernels");
  app.add_option("--repeats", o.repeats)->check(CLI::Range(1, 1000));
  app.add_option("--warmup", o.warmup)->check(CLI::Range(0, 1000));
  app.add_option("--seed", seed);
  app.add_flag("--no-bench", no_bench, "parity only");
  app.add_option("--inject-error", o.inject)
      ->check(CLI::IsMember({"add_rms_norm", "qk_norm_rope", "silu_mul"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  const auto asked = mesa_anyjev::config::ParseKernelSet(kernel_list);
  if (!asked.ok()) {
    std::cerr << "kernel_check: --kernels: " << asked.status().message()
              << "\n";
    return 2;
  }
  try {
    o.device = at::Device(device);
  } catch (const c10::Error&) {
    std::cerr << "kernel_check: --device: \"" << device
              << "\" is not cpu, cuda or cuda:N\n";
    return 2;
  }
  if (o.device.is_cuda() && !at::hasCUDA()) {
    std::cerr << "kernel_check: --device " << device
              << ": libtorch sees no CUDA device here\n";
    return 2;
  }
  if (o.device.is_cuda() && !o.device.has_index())
    o.device = at::Device("cuda:0");
  o.dtype = dtype == "float32"   ? at::kFloat
            : dtype == "float16" ? at::kHalf
                                 : at::kBFloat16;
  o.tokens = tokens;
  o.bench = !no_bench;
  std::string note;
  o.kernels = kernels::ResolveKernels(*asked, o.device, &note);
  if (!note.empty()) std::cerr << "kernel_check: " << note << "\n";
  at::manual_seed(static_cast<uint64_t>(seed));
  c10::InferenceMode guard;
  try {
    return Run(o);
  } catch (const c10::Error& e) {
    std::cerr << "kernel_check: " << e.what_without_backtrace() << "\n";
    return 1;
  }
}
