#!/usr/bin/env bash
# make check-arm64 (issue 26; docs/build.md, "aarch64"): cross-compiles the
# daemon, the CLI and the unit tests for linux/arm64 into their own build
# directory (cmake/aarch64-linux-gnu.cmake, the aarch64 torch wheel that
# scripts/install.sh --arm64 unpacked), runs every unit test under
# qemu-user, then the aarch64 daemon against the x86_64 one on one tiny
# Qwen3 (tests/arm64/test_arm64_parity.py). Exits non-zero on any failure.
# CUDA=1 (`make check-arm64 CUDA=1`; docs/build.md, "The GB10's CUDA build,
# linked here"): the daemon as the GB10 builds it instead, against
# libtorch_cuda of the aarch64 wheels (scripts/install.sh --arm64-cuda) with
# our kernels cross-compiled for sm_120; checks what it links and which GPU
# code it holds, then the parity test on its CPU paths. The unit tests under
# qemu are the CPU build's (the same sources; CUDA=1 adds only the seam's
# CUDA side, which nothing here can run).
# usage: [CUDA=1] scripts/check_arm64.sh ARM64_BUILD_DIR NATIVE_BUILD_DIR JOBS
set -euo pipefail
cd "$(dirname "$0")/.."
ARM64_BUILD="${1:-build-arm64}"
NATIVE_BUILD="${2:-build}"
JOBS="${3:-$(nproc)}"
PYTHON="${PYTHON:-/opt/mesa-anyjev/venv/bin/python}"
CUDA="${CUDA:-0}"
ARM64_CUDA_DIR="${MESA_ANYJEV_ARM64_CUDA_DIR:-/opt/mesa-anyjev/arm64-cuda}"

phase() {
  local began=$SECONDS
  "$@"
  echo "[check-arm64] $1 took $((SECONDS - began)) s"
}

native_daemon="$NATIVE_BUILD/server/mesa-anyjevd"
if [ ! -x "$native_daemon" ]; then
  echo "[check-arm64] $native_daemon is missing: the x86_64 daemon is the reference" \
    "(make build)" >&2
  exit 2
fi

configure() {
  local cuda=()
  if [ "$CUDA" = 1 ]; then
    cuda=(-DMESA_ANYJEV_CROSS_CUDA=ON -DMESA_ANYJEV_TORCH_ROOT="$ARM64_CUDA_DIR")
  fi
  cmake -S . -B "$ARM64_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DMESA_ANYJEV_PYTHON="$PYTHON" "${cuda[@]}" >/dev/null
}

# The unit tests, and the three over libtorch: the CPU paths' choices
# (fused norms, the packed-GEMM probe, cpu_gemm auto, mallopt), its CPU
# allocator under the host block cache, libtorch and gRPC in one process.
TESTS=(unit_tests cpu_paths_test host_block_cache_test torch_grpc_coexistence_test)
build() {
  if [ "$CUDA" = 1 ]; then
    cmake --build "$ARM64_BUILD" -j "$JOBS" --target mesa-anyjevd
  else
    cmake --build "$ARM64_BUILD" -j "$JOBS" --target mesa-anyjevd mesa-anyjev "${TESTS[@]}"
  fi
}

# CUDA=1: what the GB10's daemon links and the GPU code it carries. The
# link itself (every symbol of libtorch_cuda and the nvidia libraries
# resolved for aarch64) is the build's; this names what it must hold.
cuda_linked() {
  local daemon="$ARM64_BUILD/server/mesa-anyjevd" lib needed archs
  needed="$(aarch64-linux-gnu-readelf -d "$daemon" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
  for lib in libtorch_cuda.so libc10_cuda.so libcudart.so.13; do
    if ! grep -qx "$lib" <<<"$needed"; then
      echo "[check-arm64] the CUDA daemon does not link $lib; it links:" $needed >&2
      return 1
    fi
  done
  # Our kernels' machine code: sm_120 cubins (the GB10 is sm_121, which
  # runs sm_120 code) and nothing for another GPU.
  archs="$("$ARM64_CUDA_DIR/cuda-13.0/bin/cuobjdump" --list-elf "$daemon" |
    sed -n 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/p' | sort | uniq -c)"
  echo "[check-arm64] the daemon's cubins by GPU:" $archs
  if [ -z "$archs" ] || grep -qv ' sm_120$' <<<"$archs"; then
    echo "[check-arm64] the kernels must be sm_120 machine code alone" >&2
    return 1
  fi
}

# Every unit test under emulation, none left out: each binary runs once
# (ctest would start it once per case, and each start loads libtorch under
# qemu: about 5 s here, half an hour over unit_tests' cases).
unit() {
  local test
  for test in "${TESTS[@]}"; do
    echo "[check-arm64] $test"
    "${EMULATOR[@]}" "$ARM64_BUILD/tests/$test"
  done
}

parity() {
  MESA_ANYJEVD="$native_daemon" MESA_ANYJEVD_ARM64="$ARM64_BUILD/server/mesa-anyjevd" \
    MESA_ANYJEV_QEMU="${EMULATOR[*]}" MESA_ANYJEV_PROTO_DIR=proto \
    "$PYTHON" -m pytest -q -p no:cacheprovider tests/arm64/test_arm64_parity.py
}

began_all=$SECONDS
phase configure
phase build
# The toolchain's emulator (qemu-aarch64 and its flags), one word each.
IFS=';' read -r -a EMULATOR < <(sed -n 's/^CMAKE_CROSSCOMPILING_EMULATOR:[A-Z]*=//p' \
  "$ARM64_BUILD/CMakeCache.txt")
if [ "$CUDA" = 1 ]; then
  phase cuda_linked
else
  phase unit
fi
phase parity
echo "[check-arm64] passed in $((SECONDS - began_all)) s"
