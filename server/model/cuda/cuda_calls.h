// The one seam for calls into CUDA: libtorch_cuda, c10_cuda and the CUDA
// runtime (the device's facts, the current device and stream, the caching
// allocator, synchronising, CUDA graphs) and, in kernels/cuda_launch.h, our
// own kernels' launchers. Everything else of the model calls libtorch_cpu
// and c10 only, so the same objects link either against the CUDA libraries
// (cuda_calls.cc and the .cu files: the native build on a CUDA torch) or
// against the CPU libraries alone with no_cuda.cc, the twin of both headers
// (the aarch64 cross build, and the CPU-only link CI makes of the daemon:
// docs/build.md). No CUDA or libtorch header here: ints, pointers and
// statuses only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mesa_anyjev::model::cuda {

// Whether this binary links the CUDA side of the seam (false: the twin).
bool Linked();

// The driver's and the runtime's CUDA versions (1000 * major + 10 * minor);
// 0 where there is no driver, or no CUDA in this build.
struct Versions {
  int driver = 0;
  int runtime = 0;
};
Versions ReadVersions();

struct Properties {
  std::string name;
  int major = 0, minor = 0;
  bool integrated = false;  // memory shared with the CPU (the GB10)
  int64_t total_bytes = 0;
};
// FAILED_PRECONDITION naming the call that failed.
absl::StatusOr<Properties> ReadProperties(int device);
// The device's free memory (cudaMemGetInfo); never asked of an integrated
// device, where it reports MemFree (page cache counted as used).
absl::StatusOr<int64_t> FreeBytes(int device);

// Makes `device` the calling thread's current CUDA device: graph capture,
// its streams and the synchronise that classifies a failure act on the
// current device, not on a tensor's.
void SetCurrentDevice(int device);
int CurrentDevice();

// The current stream of `device`, as a cudaStream_t.
void* CurrentStream(int device);
const char* ErrorString(int error);

// Waits for `device`'s work; throws what libtorch throws when the device
// failed (the caller classifies it).
void Synchronize(int device);

// Milliseconds `work` takes on `device`'s current stream, by events
// recorded around it (the kernel check's timing).
double EventMilliseconds(int device, const std::function<void()>& work);

// The caching allocator's statistics for `device`, and its cached blocks
// handed back to the device.
struct AllocatorStats {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // reserved from the device
};
AllocatorStats ReadAllocatorStats(int device);
void EmptyCache();

// A CUDA graph of one body: captured on a side stream of `device` after one
// eager run there (cuBLAS and the allocator set up outside the capture), in
// a memory pool every graph of the process shares (they replay one at a
// time). A body that throws while capturing ends the capture and releases
// what it captured before the exception leaves, so the stream is usable.
class Graph {
 public:
  static std::unique_ptr<Graph> Capture(int device,
                                        const std::function<void()>& body);
  virtual ~Graph() = default;
  virtual void Replay() = 0;
};

}  // namespace mesa_anyjev::model::cuda
