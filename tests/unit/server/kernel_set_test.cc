// model.kernels: the parsed set, its refusals (through the validator, which
// names the key), and which kernels run where.
#include "common/config/kernel_set.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/config/config.h"
#include "common/config/config_validator.h"

namespace mesa_anyjev::config {
namespace {

KernelSet Parsed(const std::string& text) {
  const absl::StatusOr<KernelSet> set = ParseKernelSet(text);
  REQUIRE(set.ok());
  return *set;
}

std::string Refusal(const std::string& text) {
  Config config;
  config.model.kernels = text;
  const absl::Status status =
      ValidateMerged(config, {{"model.kernels", "flag --set"}});
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST_CASE("model.kernels: aten by default, fused is all, lists pick",
          "[kernels]") {
  CHECK_FALSE(Parsed(Config{}.model.kernels).any());
  CHECK(Parsed("aten") == KernelSet{});
  CHECK(Parsed("fused") == KernelSet{true, true, true});
  CHECK(Parsed(" silu_mul , add_rms_norm") == KernelSet{true, false, true});
  CHECK(Parsed("qk_norm_rope") == KernelSet{false, true, false});
  CHECK(Parsed("silu_mul,silu_mul") == KernelSet{false, false, true});
  CHECK(KernelSet{}.ToString() == "aten");
  CHECK(KernelSet{true, true, true}.ToString() == "fused");
  CHECK(KernelSet{true, false, true}.ToString() == "add_rms_norm,silu_mul");
  for (const char* text : {"aten", "fused", "qk_norm_rope,silu_mul"}) {
    CHECK(Parsed(Parsed(text).ToString()) == Parsed(text));
  }
}

TEST_CASE("model.kernels: unknown names are refused naming the key",
          "[kernels]") {
  CHECK(Refusal("silu") ==
        "config: model.kernels: 'silu' in 'silu' is not a kernel; aten, "
        "fused, or a comma list of add_rms_norm, qk_norm_rope, silu_mul "
        "(from flag --set)");
  CHECK(Refusal("aten,silu_mul") ==
        "config: model.kernels: 'aten' in 'aten,silu_mul' is not a kernel; "
        "aten, fused, or a comma list of add_rms_norm, qk_norm_rope, "
        "silu_mul (from flag --set)");
  CHECK(Refusal("silu_mul,,add_rms_norm") ==
        "config: model.kernels: an empty name in 'silu_mul,,add_rms_norm' is "
        "not a kernel; aten, fused, or a comma list of add_rms_norm, "
        "qk_norm_rope, silu_mul (from flag --set)");
  CHECK(Refusal(" ") ==
        "config: model.kernels: is empty; aten, fused, or a comma list of "
        "add_rms_norm, qk_norm_rope, silu_mul (from flag --set)");
  Config config;
  config.model.kernels = "fused";
  CHECK(ValidateMerged(config, {}).ok());
}

TEST_CASE("model.kernels: ours run on CUDA in a build with them, else ATen",
          "[kernels]") {
  const KernelSet all{true, true, true};
  std::string note = "stale";
  CHECK(ResolveKernelSet(all, true, true, &note) == all);
  CHECK(note.empty());
  CHECK(ResolveKernelSet(KernelSet{}, false, false, &note) == KernelSet{});
  CHECK(note.empty());
  CHECK(ResolveKernelSet(all, false, true, &note) == KernelSet{});
  CHECK(note ==
        "model.kernels: fused asked for; our kernels are CUDA only, so the "
        "ATen path runs");
  CHECK(ResolveKernelSet(KernelSet{false, false, true}, true, false, &note) ==
        KernelSet{});
  CHECK(note ==
        "model.kernels: silu_mul asked for; this build has no CUDA kernels "
        "(cross-compiled), so the ATen path runs");
  CHECK(ResolveKernelSet(all, false, true, nullptr) == KernelSet{});
}

}  // namespace
}  // namespace mesa_anyjev::config
