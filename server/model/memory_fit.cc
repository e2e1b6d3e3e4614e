#include "server/model/memory_fit.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mesa_anyjev::model {
namespace {

int64_t SaturatingSum(std::initializer_list<int64_t> parts) {
  int64_t sum = 0;
  for (int64_t part : parts) {
    if (part > std::numeric_limits<int64_t>::max() - sum) {
      return std::numeric_limits<int64_t>::max();
    }
    sum += part;
  }
  return sum;
}

}  // namespace

std::string Gigabytes(int64_t bytes) {
  return absl::StrFormat("%.2f GB", static_cast<double>(bytes) / 1e9);
}

absl::Status CheckMemoryFits(const MemoryPlan& plan, const DeviceFacts& facts,
                             int64_t mem_available) {
  const int64_t need =
      SaturatingSum({plan.weights, plan.kv_pool, plan.host_cache, plan.reserve,
                     plan.pass, plan.graph_pool});
  const int64_t available =
      facts.shared_memory ? mem_available : facts.device_free_bytes;
  if (need <= available) return absl::OkStatus();
  const std::string against =
      facts.shared_memory
          ? absl::StrCat("MemAvailable ", Gigabytes(available),
                         facts.device == "cpu"
                             ? ""
                             : " (system memory, shared with the GPU)")
          : absl::StrCat("the free memory of ", facts.device, " (", facts.name,
                         ") ", Gigabytes(available));
  const bool graphs = plan.graph_pool > 0;
  return absl::InvalidArgumentError(absl::StrCat(
      "the model does not fit: weights ", Gigabytes(plan.weights),
      " + engine.kv_pool_bytes ", Gigabytes(plan.kv_pool),
      " + engine.host_cache_bytes ", Gigabytes(plan.host_cache),
      " + engine.memory_reserve_bytes ", Gigabytes(plan.reserve),
      " + a pass of engine.batch_tokens ", Gigabytes(plan.pass),
      graphs ? absl::StrCat(" + the CUDA graphs of engine.cuda_graph_tokens ",
                            Gigabytes(plan.graph_pool))
             : "",
      " = ", Gigabytes(need), " > ", against, "; lower engine.kv_pool_bytes",
      plan.host_cache > 0 ? ", engine.host_cache_bytes" : "",
      graphs ? ", engine.cuda_graph_tokens" : "",
      " or engine.batch_tokens, or free memory"));
}

}  // namespace mesa_anyjev::model
