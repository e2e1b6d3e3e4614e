// The twin of the CUDA seam (cuda_calls.h and kernels/cuda_launch.h) for a
// binary linked against the CPU libraries alone (libtorch_cpu and c10): the
// aarch64 cross build, and the daemon's second link in CI that proves no
// CUDA call escaped the seam. CUDA is never available in such a binary
// (at::hasCUDA() is false without libtorch_cuda), so the model takes its
// CPU paths and nothing here is reached on a served pass; what is reached
// says plainly that this build has no CUDA.
#include <stdexcept>
#include <string>

#include "server/model/cuda/cuda_calls.h"
#include "server/model/kernels/cuda_launch.h"

namespace mesa_anyjev::model::cuda {
namespace {

constexpr const char* kNoCuda = "this build has no CUDA (linked without it)";
constexpr int kErrorNotSupported = 801;  // cudaErrorNotSupported

[[noreturn]] void Unavailable(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + kNoCuda);
}

}  // namespace

bool Linked() { return false; }
Versions ReadVersions() { return {}; }

absl::StatusOr<Properties> ReadProperties(int) {
  return absl::FailedPreconditionError(kNoCuda);
}

absl::StatusOr<int64_t> FreeBytes(int) {
  return absl::FailedPreconditionError(kNoCuda);
}

void SetCurrentDevice(int) { Unavailable("setting the CUDA device"); }
int CurrentDevice() { return -1; }
void* CurrentStream(int) { Unavailable("a CUDA stream"); }
const char* ErrorString(int) { return kNoCuda; }
void Synchronize(int) { Unavailable("synchronising a CUDA device"); }
double EventMilliseconds(int, const std::function<void()>&) {
  Unavailable("timing with CUDA events");
}
AllocatorStats ReadAllocatorStats(int) { return {}; }
void EmptyCache() {}

std::unique_ptr<Graph> Graph::Capture(int, const std::function<void()>&) {
  Unavailable("capturing a CUDA graph");
}

}  // namespace mesa_anyjev::model::cuda

namespace mesa_anyjev::model::kernels::cuda {

bool KernelsBuilt() { return false; }

int LaunchAddRmsNorm(Dtype, const void*, void*, const void*, void*, int64_t,
                     int64_t, float, Stream) {
  return model::cuda::kErrorNotSupported;
}

int LaunchQkNormRope(Dtype, const QkNormRopeArgs&, Stream) {
  return model::cuda::kErrorNotSupported;
}

int LaunchSiluMul(Dtype, const void*, void*, int64_t, int64_t, Stream) {
  return model::cuda::kErrorNotSupported;
}

}  // namespace mesa_anyjev::model::kernels::cuda
