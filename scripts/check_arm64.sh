#!/usr/bin/env bash
# make check-arm64 (issue 26; docs/build.md, "aarch64"): cross-compiles the
# daemon, the CLI and the unit tests for linux/arm64 into their own build
# directory (cmake/aarch64-linux-gnu.cmake, the aarch64 torch wheel that
# scripts/install.sh --arm64 unpacked), runs every unit test under
# qemu-user, then the aarch64 daemon against the x86_64 one on one tiny
# Qwen3 (tests/arm64/test_arm64_parity.py). Exits non-zero on any failure.
# usage: scripts/check_arm64.sh ARM64_BUILD_DIR NATIVE_BUILD_DIR JOBS
set -euo pipefail
cd "$(dirname "$0")/.."
ARM64_BUILD="${1:-build-arm64}"
NATIVE_BUILD="${2:-build}"
JOBS="${3:-$(nproc)}"
PYTHON="${PYTHON:-/opt/mesa-anyjev/venv/bin/python}"

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
  cmake -S . -B "$ARM64_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DMESA_ANYJEV_PYTHON="$PYTHON" >/dev/null
}

# The unit tests, and the three over libtorch: the CPU paths' choices
# (fused norms, the packed-GEMM probe, cpu_gemm auto, mallopt), its CPU
# allocator under the host block cache, libtorch and gRPC in one process.
TESTS=(unit_tests cpu_paths_test host_block_cache_test torch_grpc_coexistence_test)
build() {
  cmake --build "$ARM64_BUILD" -j "$JOBS" --target mesa-anyjevd mesa-anyjev "${TESTS[@]}"
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
phase unit
phase parity
echo "[check-arm64] passed in $((SECONDS - began_all)) s"
