#!/usr/bin/env bash
# make gpu-rehearsal (issue 28): the GPU check from the bundle, without a
# GPU, in an environment made to look like the GPU test host: the bundle
# unpacked from its travelling form into a fresh folder, the host-like
# Python environment (scripts/gpu-host-requirements.txt: torch 2.11.0, the
# image's transformers and numpy, none of our packages) as `python3`, an
# environment emptied of everything else (no /opt/mesa-anyjev on any path,
# no LD_LIBRARY_PATH), and GPU_SMOKE=1 (CPU, small shapes, float32). The
# loader must find every library the binaries load in the bundle, that
# environment or the C runtime (GPU_REHEARSAL=1 makes host_env.py refuse
# any other folder: this machine has Debian's gRPC, the host does not).
#   tests/gpu/rehearsal.sh BUNDLE.tar.xz
set -euo pipefail
cd "$(dirname "$0")/../.."
BUNDLE="$(realpath "$1")"
HOST_VENV="${MESA_ANYJEV_GPU_HOST_VENV:-/opt/gpu-host-image/venv}"
FRESH="$(mktemp -d /tmp/mesa-anyjev-rehearsal.XXXXXX)"
trap 'rm -rf "$FRESH"' EXIT
cp "$BUNDLE" "$FRESH/bundle.tar.xz"
mkdir -p "$FRESH/out"
start=$SECONDS
env -i HOME="$FRESH" PATH="$HOST_VENV/bin:/usr/bin:/bin:/usr/sbin:/sbin" LANG=C.UTF-8 \
  GPU_SMOKE=1 GPU_REHEARSAL=1 GPU_BUNDLE="$FRESH/bundle.tar.xz" GPU_WORK="$FRESH/work" \
  OUT="$FRESH/out" bash tests/gpu/run.sh
mkdir -p build/gpu-rehearsal
cp "$FRESH"/out/* build/gpu-rehearsal/
echo "[gpu-rehearsal] passed in $((SECONDS - start)) s; report in build/gpu-rehearsal/"
