#!/usr/bin/env bash
# GPU checks (needs an NVIDIA GPU, the project's Python environment and a
# build of qwen3_dump and mesa-anyjevd): CUDA bf16 parity on a tiny Qwen3
# against transformers, every engine path against the CPU float32 results,
# prefill tokens/s of a Qwen3-8B-shaped random checkpoint, make
# bench-engine's table and the annotation workload on it (bf16), ours against
# transformers and anyjev on the same GPU. GPU_SMOKE=1: the same on the CPU
# with small shapes in float32 (CI runs it: ctest -L gpu_smoke).
#   tests/gpu/run.sh [BUILD_DIR]     GPU_LAYERS=36 OUT=/tmp
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${1:-build}"
PYTHON="${PYTHON:-/opt/mesa-anyjev/venv/bin/python}"
[ "${GPU_SMOKE:-}" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
export HF_HUB_OFFLINE=1
export MESA_ANYJEV_QWEN3_DUMP="$BUILD_DIR/tests/qwen3_dump"
export MESA_ANYJEVD="${MESA_ANYJEVD:-$BUILD_DIR/server/mesa-anyjevd}"
exec "$PYTHON" tests/gpu/gpu_check.py
