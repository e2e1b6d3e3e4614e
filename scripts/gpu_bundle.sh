#!/usr/bin/env bash
# make gpu-bundle (issue 28): everything the GPU check needs beyond the GPU
# test host's image, in one file that travels with the working tree.
#
#   scripts/gpu_bundle.sh BUILD_DIR OUT_FILE
#
# - mesa-anyjevd, qwen3_dump and kernel_check (our CUDA kernels against
#   their CPU reference) built for CUDA (sm_90) against the torch of the
#   host-like environment (scripts/gpu-host-requirements.txt: the host's
#   torch 2.11.0+cu130), RPATH removed: on arrival they find libtorch through
#   the host's own torch, as tests/gpu/run.sh sets the library path;
# - the shared libraries they load that the image lacks, found by the loader
#   itself (ldd), not listed by hand: everything outside the torch wheel, the
#   nvidia wheels, the driver and the C runtime (glibc, libstdc++, libgcc_s),
#   which the image has;
# - the wheels the check's Python needs beyond the image (anyjev 0.2.0 for
#   the peer; grpcio, protobuf, grpcio-tools, grpcio-health-checking at the
#   project's pins, so the stubs the e2e harness generates match their
#   runtime whatever the image's versions are), cp312 like the host;
# - manifest.json: the torch it was built against and the newest glibc and
#   libstdc++ symbol versions anything in it needs, which run.sh checks
#   before it spends a minute of GPU time.
# Not the loader and C libraries: the binaries need no newer symbols than
# the manifest records (Debian 12's gcc 12 and glibc 2.36), which the host's
# Ubuntu-24.04-based image (glibc 2.39) provides, and libtorch must load with
# the same C runtime as the host's Python torch. run.sh checks it and stops
# with one line where it does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-gpu}"
OUT_FILE="${2:-$BUILD_DIR/mesa-anyjev-gpu.tar.xz}"
HOST_VENV="${MESA_ANYJEV_GPU_HOST_VENV:-/opt/gpu-host-image/venv}"
PROJECT_VENV="${MESA_ANYJEV_VENV:-/opt/mesa-anyjev/venv}"
LIMIT_MIB=45
log() { printf '[gpu-bundle] %s\n' "$*"; }

HOST_PY="$HOST_VENV/bin/python"
SITE="$("$HOST_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TORCH_VERSION="$("$HOST_PY" -c 'import torch; print(torch.__version__)')"
TORCH_PREFIX="$("$HOST_PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
log "torch $TORCH_VERSION from $HOST_VENV"

# nvcc from the compiler wheels (cmake/libtorch.cmake), as every build; sm_90
# only (the H200).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DMESA_ANYJEV_PYTHON="$HOST_PY" >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target mesa-anyjevd qwen3_dump kernel_check

STAGE="$BUILD_DIR/gpu-bundle"
rm -rf "$STAGE"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/wheels"
BINARIES=("$BUILD_DIR/server/mesa-anyjevd" "$BUILD_DIR/tests/qwen3_dump"
  "$BUILD_DIR/tests/kernel_check")
for b in "${BINARIES[@]}"; do
  cp "$b" "$STAGE/bin/"
done

# The libraries the image has: its torch and nvidia wheels (found through
# the host's python on arrival), the driver, and the C runtime.
torch_lib_path() {
  local dirs=("$SITE/torch/lib")
  for d in "$SITE"/nvidia/*/lib "$SITE"/nvidia/cu13/lib; do [ -d "$d" ] && dirs+=("$d"); done
  local IFS=:
  echo "${dirs[*]}"
}
TORCH_LIBS="$(torch_lib_path)"
is_image_lib() {
  case "$1" in
    "$SITE"/*) return 0 ;;
    */libc.so.*|*/libm.so.*|*/libpthread.so.*|*/libdl.so.*|*/librt.so.*|*/ld-linux*) return 0 ;;
    */libstdc++.so.*|*/libgcc_s.so.*|*/libcuda.so.*|*/libresolv.so.*|*/libutil.so.*) return 0 ;;
  esac
  return 1
}
missing=0
while read -r name path; do
  if [ "$path" = "not" ]; then
    log "not found by the loader: $name"; missing=1; continue
  fi
  is_image_lib "$path" && continue
  cp -L "$path" "$STAGE/lib/$name"
done < <(LD_LIBRARY_PATH="$TORCH_LIBS" ldd "${BINARIES[@]}" |
         awk '$2 == "=>" && $3 != "" {print $1, $3}' | sort -u)
[ "$missing" -eq 0 ] || { log "a library the binaries need was not found"; exit 1; }
chmod u+w "$STAGE"/bin/* "$STAGE"/lib/*
strip --strip-unneeded "$STAGE"/bin/* "$STAGE"/lib/*
# No RPATH: the build machine's folders mean nothing there, and here they
# would let the rehearsal find a library the bundle lacks.
for f in "$STAGE"/bin/* "$STAGE"/lib/*; do patchelf --remove-rpath "$f"; done

# The host's Python is CPython 3.12 on x86_64: binary wheels for exactly that.
pins="$("$PROJECT_VENV/bin/python" -c 'import importlib.metadata as m
print(" ".join(f"{n}=={m.version(n)}" for n in ("grpcio", "grpcio-tools", "protobuf", "grpcio-health-checking", "anyjev")))')"
platforms=()
for n in 17 27 28 34 35 39; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
# shellcheck disable=SC2086
"$PROJECT_VENV/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 "${platforms[@]}" \
  -d "$STAGE/wheels" $pins

# The newest symbol versions anything in the bundle needs.
needs() {
  objdump -T "$STAGE"/bin/* "$STAGE"/lib/* | grep -o "$1_[0-9.]*" | sort -Vu | tail -n1
}
"$HOST_PY" - "$STAGE" "$TORCH_VERSION" "$(needs GLIBC)" "$(needs GLIBCXX)" \
  "$(git rev-parse HEAD)" <<'EOF'
import json, os, sys
stage, torch_version, glibc, glibcxx, commit = sys.argv[1:]
files = {os.path.relpath(os.path.join(d, f), stage): os.path.getsize(os.path.join(d, f))
         for d, _, fs in os.walk(stage) for f in fs}
json.dump({"torch": torch_version, "cuda_arch": "sm_90", "needs_glibc": glibc,
           "needs_glibcxx": glibcxx, "commit": commit, "files": dict(sorted(files.items()))},
          open(os.path.join(stage, "manifest.json"), "w"), indent=1)
EOF

mkdir -p "$(dirname "$OUT_FILE")"
tar -C "$STAGE" -cf - . | xz -T0 -9 > "$OUT_FILE.tmp"
mv "$OUT_FILE.tmp" "$OUT_FILE"
size=$(stat -c %s "$OUT_FILE")
log "$(du -sh "$STAGE" | cut -f1) unpacked, $((size / 1024 / 1024)) MiB packed: $OUT_FILE"
log "needs $(needs GLIBC), $(needs GLIBCXX); built against torch $TORCH_VERSION"
if [ "$size" -gt $((LIMIT_MIB << 20)) ]; then
  log "larger than the ${LIMIT_MIB} MiB it may travel in"; exit 1
fi
