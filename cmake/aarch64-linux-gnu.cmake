# Cross-compiling for linux/arm64 (the GB10) on an x86_64 Debian host with
# Debian's cross toolchain and multiarch arm64 libraries (scripts/install.sh
# --arm64; docs/build.md). `make check-arm64` uses it.
# Programs run at build time (protoc, grpc_cpp_plugin) are the host's;
# target programs (test discovery, ctest) run under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(PKG_CONFIG_EXECUTABLE aarch64-linux-gnu-pkg-config CACHE FILEPATH "")

# Libraries, headers and CMake packages: the arm64 ones under /usr (found by
# CMAKE_LIBRARY_ARCHITECTURE), and yaml-cpp's and prometheus-cpp's,
# unpacked beside the torch wheel (their arm64 -dev packages cannot be
# installed beside the amd64 ones).
set(MESA_ANYJEV_ARM64_DIR "/opt/mesa-anyjev/arm64" CACHE PATH
  "What scripts/install.sh --arm64 unpacked")
list(APPEND CMAKE_PREFIX_PATH "${MESA_ANYJEV_ARM64_DIR}/dev/usr")
set(MESA_ANYJEV_TORCH_ROOT "${MESA_ANYJEV_ARM64_DIR}" CACHE PATH "")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# qemu with a prefix whose /proc/cpuinfo is arm64's: libtorch's CPU
# detection crashes on the host's x86 one. Other files fall back to /.
# SVE vectors of 128 bits as the GB10's Cortex-X925/A725 have (qemu's
# default is 512), so libtorch and oneDNN pick the kernels they pick there.
set(CMAKE_CROSSCOMPILING_EMULATOR
  "qemu-aarch64;-cpu;max,sve-default-vector-length=16;-L;${MESA_ANYJEV_ARM64_DIR}/qemu-prefix"
  CACHE STRING "" FORCE)
