// The kernel's estimate of memory available to a new workload
// (/proc/meminfo's MemAvailable): what the daemon checks a load against on
// the CPU and on a GPU that shares the system's memory (the GB10), and what
// the metrics and `info` report. MemFree is not it: it counts the page cache
// as used, which is what cudaMemGetInfo reports on such a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::util {

inline constexpr char kMemInfoPath[] = "/proc/meminfo";

// MemAvailable in bytes from /proc/meminfo's text; INVALID_ARGUMENT when it
// has no well-formed "MemAvailable: N kB" line.
absl::StatusOr<int64_t> ParseMemAvailable(std::string_view meminfo);

// Reads `path` (at most 64 KiB) and parses it.
absl::StatusOr<int64_t> ReadMemAvailable(
    const std::string& path = kMemInfoPath);

}  // namespace mesa_anyjev::util
