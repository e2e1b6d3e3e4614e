// The load's memory check and the CUDA version check (server/model/
// memory_fit.h, device_facts.h): plain figures, no GPU.
#include "server/model/memory_fit.h"

#include <catch2/catch.hpp>
#include <limits>

#include "server/model/device_facts.h"

namespace mesa_anyjev::model {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

DeviceFacts Gb10() {
  return {"cuda:0",
          "NVIDIA GB10",
          "12.1",
          /*shared_memory=*/true,
          13000,
          13020,
          /*device_free_bytes=*/0,
          int64_t{128} * kGiB};
}

DeviceFacts H200(int64_t free) {
  return {"cuda:0", "NVIDIA H200", "9.0", false,
          13000,    13000,         free,  int64_t{143} * kGiB};
}

TEST_CASE("a plan that fits passes", "[memory]") {
  const MemoryPlan plan{16 * kGiB, 8 * kGiB, 0, 2 * kGiB, 0, 0};
  CHECK(CheckMemoryFits(plan, Gb10(), 26 * kGiB).ok());
  CHECK(CheckMemoryFits(plan, H200(26 * kGiB), 0).ok());
}

TEST_CASE("on shared memory the plan is checked against MemAvailable",
          "[memory]") {
  const MemoryPlan plan{16'400'000'000, 100'000'000'000, 0,
                        8'000'000'000,  1'000'000'000,   0};
  // MemAvailable short; the device's free bytes (0 here: never read on an
  // integrated device) play no part.
  const absl::Status status = CheckMemoryFits(plan, Gb10(), 108'000'000'000);
  REQUIRE(absl::IsInvalidArgument(status));
  CHECK(status.message() ==
        "the model does not fit: weights 16.40 GB + engine.kv_pool_bytes "
        "100.00 GB + engine.host_cache_bytes 0.00 GB + "
        "engine.memory_reserve_bytes 8.00 GB + a pass of engine.batch_tokens "
        "1.00 GB = 125.40 GB > MemAvailable 108.00 GB (system memory, shared "
        "with the GPU); lower engine.kv_pool_bytes or engine.batch_tokens, or "
        "free memory");
  // The CUDA graphs' pool counts too, and is named.
  MemoryPlan graphs = plan;
  graphs.graph_pool = 500'000'000;
  CHECK(
      CheckMemoryFits(graphs, Gb10(), 125'500'000'000)
          .message()
          .find(
              "+ the CUDA graphs of engine.cuda_graph_tokens 0.50 GB = 125.90 "
              "GB") != std::string::npos);
}

TEST_CASE("on the CPU the block cache counts and is named", "[memory]") {
  DeviceFacts cpu;
  cpu.device = cpu.name = "cpu";
  const MemoryPlan plan{
      1'000'000'000, 2'000'000'000, 3'000'000'000, 1'000'000'000, 0, 0};
  CHECK(CheckMemoryFits(plan, cpu, 7'000'000'000).ok());
  const absl::Status status = CheckMemoryFits(plan, cpu, 6'999'999'999);
  REQUIRE(absl::IsInvalidArgument(status));
  CHECK(status.message().find("> MemAvailable 7.00 GB; lower "
                              "engine.kv_pool_bytes, "
                              "engine.host_cache_bytes or "
                              "engine.batch_tokens") != std::string::npos);
}

TEST_CASE("on a discrete GPU the plan is checked against its free memory",
          "[memory]") {
  const MemoryPlan plan{16 * kGiB, 8 * kGiB, 0, 2 * kGiB, 0, 0};
  const absl::Status status = CheckMemoryFits(plan, H200(20 * kGiB), 1 << 30);
  REQUIRE(absl::IsInvalidArgument(status));
  CHECK(status.message().find("> the free memory of cuda:0 (NVIDIA H200) "
                              "21.47 GB") != std::string::npos);
}

TEST_CASE("figures near the limits of int64 do not overflow", "[memory]") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const MemoryPlan plan{kMax, kMax, kMax, kMax, kMax, kMax};
  CHECK(absl::IsInvalidArgument(CheckMemoryFits(plan, Gb10(), kMax - 1)));
  CHECK(CheckMemoryFits(MemoryPlan{}, Gb10(), 0).ok());
}

TEST_CASE("CUDA versions: text, and a driver too old for the runtime",
          "[memory]") {
  CHECK(CudaVersionText(13020) == "13.2");
  CHECK(CudaVersionText(12080) == "12.8");
  CHECK(CudaVersionText(0).empty());
  // Minor-version compatibility: a 13.2 runtime on a 580 driver (13.0).
  CHECK(CheckDriverFitsRuntime(13000, 13020).ok());
  CHECK(CheckDriverFitsRuntime(13000, 13000).ok());
  CHECK(CheckDriverFitsRuntime(0, 13000).ok());  // no driver: said elsewhere
  const absl::Status old = CheckDriverFitsRuntime(12080, 13000);
  REQUIRE(absl::IsFailedPrecondition(old));
  CHECK(old.message() ==
        "the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 "
        "runtime this daemon's torch was built with: install a driver for "
        "CUDA 13 (580.65.06 or later for CUDA 13), or build against a torch "
        "for CUDA 12.8 (docs/build.md)");
}

TEST_CASE("Describe says what the start-up log says", "[memory]") {
  CHECK(Describe(Gb10()) ==
        "device cuda:0: NVIDIA GB10, compute capability 12.1, integrated yes "
        "(memory: the system's, MemAvailable); CUDA driver 13.0, runtime "
        "13.2");
  DeviceFacts cpu;
  cpu.device = "cpu";
  CHECK(Describe(cpu) == "device cpu (memory: the system's, MemAvailable)");
}

}  // namespace
}  // namespace mesa_anyjev::model
