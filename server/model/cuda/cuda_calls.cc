// The CUDA side of the seam (cuda_calls.h): the only file of the model that
// includes CUDA's, c10_cuda's or ATen/cuda's headers (besides the kernels'
// .cu files), so the only one the CUDA build environment's check compiles
// against the image's include folders (docs/build.md).
#include "server/model/cuda/cuda_calls.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "server/model/kernels/cuda_launch.h"

namespace mesa_anyjev::model::cuda {
namespace {

absl::Status Failed(const char* what, cudaError_t error) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " failed: ", cudaGetErrorString(error)));
}

c10::DeviceIndex Index(int device) {
  return static_cast<c10::DeviceIndex>(device);
}

class CapturedGraph final : public Graph {
 public:
  explicit CapturedGraph(std::unique_ptr<at::cuda::CUDAGraph> graph)
      : graph_(std::move(graph)) {}
  void Replay() override { graph_->replay(); }

 private:
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
};

// A capture whose body threw: the stream leaves capture mode (a stream left
// capturing fails every later call on it, and the pool's streams are handed
// out again) and the allocator stops routing the stream's allocations to the
// graphs' pool. CUDAGraph::capture_end is not used here: it may stop half-way
// on the invalidated capture, before the allocator is told.
void AbandonCapture(cudaStream_t stream, c10::DeviceIndex device,
                    c10::MempoolId_t pool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial != nullptr) cudaGraphDestroy(partial);
  }
  cudaGetLastError();  // the capture's error is the exception's, not sticky
  c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
}

}  // namespace

bool Linked() { return true; }

Versions ReadVersions() {
  // Both answer without a usable device (0 when no driver is loaded).
  Versions v;
  cudaDriverGetVersion(&v.driver);
  cudaRuntimeGetVersion(&v.runtime);
  return v;
}

absl::StatusOr<Properties> ReadProperties(int device) {
  cudaDeviceProp props{};
  if (cudaError_t e = cudaGetDeviceProperties(&props, device);
      e != cudaSuccess) {
    return Failed("cudaGetDeviceProperties", e);
  }
  return Properties{props.name, props.major, props.minor, props.integrated != 0,
                    static_cast<int64_t>(props.totalGlobalMem)};
}

absl::StatusOr<int64_t> FreeBytes(int device) {
  const c10::cuda::CUDAGuard guard(Index(device));
  size_t free = 0, total = 0;
  if (cudaError_t e = cudaMemGetInfo(&free, &total); e != cudaSuccess) {
    return Failed("cudaMemGetInfo", e);
  }
  return static_cast<int64_t>(free);
}

void SetCurrentDevice(int device) { c10::cuda::set_device(Index(device)); }

int CurrentDevice() { return c10::cuda::current_device(); }

void* CurrentStream(int device) {
  return c10::cuda::getCurrentCUDAStream(Index(device)).stream();
}

const char* ErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

void Synchronize(int device) {
  const c10::cuda::CUDAGuard guard(Index(device));
  c10::cuda::device_synchronize();
}

double EventMilliseconds(int device, const std::function<void()>& work) {
  const c10::cuda::CUDAStream stream =
      c10::cuda::getCurrentCUDAStream(Index(device));
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record(stream);
  work();
  stop.record(stream);
  stop.synchronize();
  return start.elapsed_time(stop);
}

AllocatorStats ReadAllocatorStats(int device) {
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(Index(device));
  constexpr auto kAll =
      static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return {stats.allocated_bytes[kAll].current,
          stats.reserved_bytes[kAll].current};
}

void EmptyCache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

std::unique_ptr<Graph> Graph::Capture(int device,
                                      const std::function<void()>& body) {
  static const c10::MempoolId_t pool = at::cuda::graph_pool_handle();
  const c10::cuda::CUDAGuard device_guard(Index(device));
  const c10::cuda::CUDAStream current =
      c10::cuda::getCurrentCUDAStream(Index(device));
  const c10::cuda::CUDAStream stream =
      c10::cuda::getStreamFromPool(/*isHighPriority=*/false, Index(device));
  at::cuda::CUDAEvent before;
  before.record(current);
  before.block(stream);
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    body();
    stream.synchronize();
    graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    try {
      body();
    } catch (...) {
      AbandonCapture(stream.stream(), Index(device), pool);
      throw;
    }
    graph->capture_end();
  }
  at::cuda::CUDAEvent after;
  after.record(stream);
  after.block(current);
  return std::make_unique<CapturedGraph>(std::move(graph));
}

}  // namespace mesa_anyjev::model::cuda

namespace mesa_anyjev::model::kernels::cuda {
// The .cu files are linked with this side of the seam.
bool KernelsBuilt() { return true; }
}  // namespace mesa_anyjev::model::kernels::cuda
