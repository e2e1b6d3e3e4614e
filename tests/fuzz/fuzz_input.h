// Shared by the fuzz targets: the libFuzzer entry point every target
// defines, and a temporary file for loaders that read from a path.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace mesa_anyjev::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// `bytes` written to a file of this process's own (one path per process,
// rewritten per input), for loaders that take a path.
inline std::string WriteTemp(std::string_view bytes, const char* suffix) {
  const std::string path =
      "/tmp/mesa-anyjev-fuzz-" + std::to_string(getpid()) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace mesa_anyjev::fuzz
