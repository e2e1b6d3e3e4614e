#!/usr/bin/env bash
# The GPU check (tests/gpu/gpu_check.py says what it runs): CUDA bf16 parity
# on a tiny Qwen3 against transformers, every engine path against the CPU
# float32 results, the device's two ceilings, and on a Qwen3-8B-shaped
# random checkpoint (bf16) each variant's prefill of new tokens and a pass's
# anatomy, make bench-engine's table, a real out-of-memory, and the
# annotation workload, ours against transformers and anyjev on the same GPU,
# every figure held against the ceilings. Figures to $OUT/gpu_check.json
# (build/gpu-results where OUT is unset), anatomies to $OUT/anatomy-*.md,
# the log to $OUT/run.log.
#
# On the GPU test host (x86-64, its image's python3 with torch 2.11.0+cu130,
# none of our installs), from the bundle that `make gpu-bundle` builds here:
#   run: command  "bash tests/gpu/run.sh"
#        carry    ["build-gpu-bundle"]          (the bundle, under 45 MiB)
#        timeout_s 480                          (the check budgets 400 s of it)
# then read $OUT/gpu_check.json and $OUT/run.log; fix; one rerun with
# "GPU_BUDGET_S=200 bash tests/gpu/run.sh" (the budget skips the rest).
#
# With a build folder instead, on a machine with our installs:
#   tests/gpu/run.sh BUILD_DIR      (the project's venv; GPU_SMOKE=1: the same
#                                   on the CPU, small shapes, float32 - ctest)
# GPU_LAYERS=36 GPU_BUDGET_S=400 GPU_WORK=/tmp/mesa-anyjev-gpu GPU_VARIANTS=[]
set -euo pipefail
cd "$(dirname "$0")/../.."
export OUT="${OUT:-$PWD/build/gpu-results}"
export GPU_WORK="${GPU_WORK:-/tmp/mesa-anyjev-gpu}"
mkdir -p "$OUT" "$GPU_WORK"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ $# -ge 1 ]; then
  BUILD_DIR="$1"
  PYTHON="${PYTHON:-/opt/mesa-anyjev/venv/bin/python}"
  [ "${GPU_SMOKE:-}" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  export MESA_ANYJEV_QWEN3_DUMP="$BUILD_DIR/tests/qwen3_dump"
  export MESA_ANYJEVD="${MESA_ANYJEVD:-$BUILD_DIR/server/mesa-anyjevd}"
  exec "$PYTHON" tests/gpu/gpu_check.py
fi
PYTHON="${PYTHON:-python3}"
BUNDLE="${GPU_BUNDLE:-build-gpu-bundle/mesa-anyjev-gpu.tar.xz}"
exec > >(tee "$OUT/run.log") 2>&1
exports="$("$PYTHON" tests/gpu/host_env.py "$BUNDLE" "$GPU_WORK")"
eval "$exports"
"$PYTHON" tests/gpu/gpu_check.py
