#!/usr/bin/env bash
# scripts/install.sh --arm64 (issue 26): what `make check-arm64` adds to the
# core install to cross-build for linux/arm64 and run the result under
# qemu-user (docs/build.md). Never part of the default
# install: it adds a foreign architecture to dpkg, which upgrades ~21 amd64
# shared libraries in place so both architectures carry one version.
# Safe to run again: each step checks first (seconds when nothing is missing).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${MESA_ANYJEV_VENV:-/opt/mesa-anyjev/venv}"
ARM64="${MESA_ANYJEV_ARM64_DIR:-/opt/mesa-anyjev/arm64}"
CROSS_CUDA=0
[ "${1:-}" = "--cuda" ] && CROSS_CUDA=1

log() { printf '[install --arm64] %s\n' "$*"; }
sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The cross compilers named explicitly (else apt's resolver picks gcc:arm64
# and refuses), qemu, and the arm64 side of every library CMakeLists.txt
# finds in DEB_PACKAGES of install.sh. Header-only and arch-all packages
# (Eigen, nlohmann-json, CLI11, Catch2) serve both architectures as they
# are. Two -dev packages cannot be installed for both architectures at
# once (libyaml-cpp-dev is not Multi-Arch; prometheus-cpp-dev depends on
# the civetweb program): apt installs their libraries, and the -dev parts
# are unpacked below.
CROSS_PACKAGES=(crossbuild-essential-arm64 gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
  qemu-user qemu-user-static)
ARM64_LIBS=(libgrpc++-dev libprotobuf-dev libabsl-dev libcpp-httplib-dev libpcre2-dev
  libutf8proc-dev libspdlog-dev libfmt-dev libcurl4-openssl-dev libssl-dev zlib1g-dev
  libcivetweb-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libprometheus-cpp-push1.0 libyaml-cpp0.7)

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  log "dpkg: adding the arm64 architecture"
  sudo_if_needed dpkg --add-architecture arm64
fi
missing=()
for p in "${CROSS_PACKAGES[@]}" "${ARM64_LIBS[@]/%/:arm64}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "Debian packages: installing ${missing[*]}"
  sudo_if_needed apt-get update -q
  # An arm64 package that conflicts with an amd64 one makes apt remove the
  # amd64 one (and what depends on it): the native build would break.
  removed="$(apt-get install -s -q --no-install-recommends "${missing[@]}" | sed -n 's/^Remv //p')"
  if [ -n "$removed" ]; then
    echo "[install --arm64] installing ${missing[*]} would remove:" >&2
    echo "$removed" >&2
    echo "[install --arm64] nothing installed; see scripts/install_arm64.sh" >&2
    exit 1
  fi
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
else
  log "Debian packages: all $((${#CROSS_PACKAGES[@]} + ${#ARM64_LIBS[@]})) present"
fi

# The two -dev packages, unpacked with their libraries into one prefix
# (their CMake files name the libraries relative to themselves) at the
# versions apt installed; the programs load the same libraries from
# /usr/lib/aarch64-linux-gnu.
v() { dpkg-query -W -f='${Version}' "$1:arm64"; }
unpacked=("prometheus-cpp-dev:arm64=$(v libprometheus-cpp-core1.0)"
  "libprometheus-cpp-core1.0:arm64=$(v libprometheus-cpp-core1.0)"
  "libprometheus-cpp-pull1.0:arm64=$(v libprometheus-cpp-pull1.0)"
  "libprometheus-cpp-push1.0:arm64=$(v libprometheus-cpp-push1.0)"
  "libyaml-cpp-dev:arm64=$(v libyaml-cpp0.7)" "libyaml-cpp0.7:arm64=$(v libyaml-cpp0.7)")
if [ "$(cat "$ARM64/dev/.versions" 2>/dev/null || true)" != "${unpacked[*]}" ]; then
  log "unpacking ${unpacked[*]} into $ARM64/dev"
  tmp="$(mktemp -d)"
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "${unpacked[@]}" >/dev/null)
  sudo_if_needed rm -rf "$ARM64/dev"
  sudo_if_needed mkdir -p "$ARM64/dev"
  for deb in "$tmp"/*.deb; do sudo_if_needed dpkg-deb -x "$deb" "$ARM64/dev"; done
  sudo_if_needed rm -rf "$ARM64/dev/usr/share"
  echo "${unpacked[*]}" | sudo_if_needed tee "$ARM64/dev/.versions" >/dev/null
  rm -rf "$tmp"
else
  log "arm64 prometheus-cpp and yaml-cpp -dev packages: up to date"
fi

# pip as on the GB10 (scripts/pip_for_target.py): aarch64's platform tags,
# the venv's Python version and aarch64's environment markers. pip only
# finds every wheel with every manylinux tag named (--platform fills no
# gaps; the nvidia wheels are tagged 2_18, 2_25, 2_27).
pyver="$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
pip_get() { # DIR PIP-ARGS...: aarch64 wheels into DIR
  local dir="$1"
  shift
  "$VENV/bin/python" "$HERE/pip_for_target.py" aarch64 "$pyver" download -q \
    --disable-pip-version-check -d "$dir" "$@"
}
# unpack DEST SKIP WHEEL...: each wheel's torch/lib, torch/include and
# nvidia/ into DEST, less the paths that start with one of SKIP's
# comma-separated prefixes.
unpack() {
  sudo_if_needed mkdir -p "$1"
  sudo_if_needed "$VENV/bin/python" - "$@" <<'EOF'
import sys, zipfile
dest, skip, wheels = sys.argv[1], tuple(filter(None, sys.argv[2].split(","))), sys.argv[3:]
for path in wheels:
    with zipfile.ZipFile(path) as whl:
        for info in whl.infolist():
            name = info.filename
            if name.startswith(("torch/lib/", "torch/include/", "nvidia/")) and \
                    not (skip and name.startswith(skip)):
                whl.extract(info, dest)
EOF
  sudo_if_needed chmod -R a+rX "$1"
}

# The aarch64 torch wheel of the x86_64 build's pin (the CUDA build, as on
# PyPI), unpacked: torch/lib and torch/include, which cmake/libtorch.cmake
# links, less the CUDA and Python libraries nothing here loads (550 MB).
# Its libtorch_cpu.so needs libcudart and libcupti: the two small nvidia
# wheels of the cuda-toolkit pin in the wheel's metadata go beside torch/
# as its RPATH expects ($ORIGIN/../../nvidia/cu13/lib).
torch_pin="$(grep -E '^torch==' "$HERE/requirements.txt")"
want="$torch_pin; torch/lib (no cuda, python) torch/include nvidia/ (cudart cupti)"
if [ "$(cat "$ARM64/.mesa-anyjev-reqs" 2>/dev/null || true)" != "$want" ]; then
  log "aarch64 $torch_pin wheel and its CUDA runtime wheels into $ARM64"
  wheels="$(mktemp -d)"
  pip_get "$wheels" --no-deps "$torch_pin"
  # e.g. cuda-toolkit[cublas,cudart,...]==13.2.2: the same pin, two extras.
  toolkit="$("$VENV/bin/python" - "$wheels"/torch-*.whl <<'EOF'
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    text = whl.read(meta).decode()
pin = re.search(r"^Requires-Dist: cuda-toolkit\[[^\]]*\](==[^;\s]+)", text, re.M)
print("cuda-toolkit[cudart,cupti]" + pin.group(1))
EOF
)"
  pip_get "$wheels" "$toolkit"
  sudo_if_needed rm -rf "$ARM64/torch" "$ARM64/nvidia"
  unpack "$ARM64" "torch/lib/libtorch_cuda,torch/lib/libtorch_nvshmem,torch/lib/libtorch_python" \
    "$wheels"/*.whl
  rm -rf "$wheels"
  echo "$want" | sudo_if_needed tee "$ARM64/.mesa-anyjev-reqs" >/dev/null
else
  log "aarch64 $torch_pin: up to date"
fi

# --cuda (`make check-arm64 CUDA=1`; docs/build.md, "The GB10's CUDA build,
# linked here"): the same wheel whole, libtorch_cuda included, with every
# nvidia wheel it resolves to on aarch64 (cuBLAS, cuDNN, NCCL, ...: GBs;
# the linker follows libtorch_cuda's NEEDED entries through them), into a
# folder of its own; a CUDA compiler that cross-compiles our kernels for
# aarch64: the host's nvcc, cicc and ptxas (x86_64 programs of install.sh's
# compiler wheels, hard-linked) over a targets/aarch64-linux (the folder
# nvcc's -target-dir and CMake's cross-compiled CUDA name) made of the
# aarch64 builds of the same compiler wheels' headers and libraries; and
# cuobjdump, to read which GPUs the kernels were built for.
if [ "$CROSS_CUDA" -eq 1 ]; then
  CUDA_DIR="${MESA_ANYJEV_ARM64_CUDA_DIR:-/opt/mesa-anyjev/arm64-cuda}"
  HOST_CUDA="${MESA_ANYJEV_CUDA_ROOT:-/opt/mesa-anyjev/cuda-13.0}"
  compiler="$(sha256sum <"$HERE/cuda-compiler-requirements.txt" | cut -d' ' -f1)"
  want="$torch_pin and its aarch64 nvidia wheels, whole; cross nvcc $compiler; cuobjdump"
  if [ "$(cat "$CUDA_DIR/.mesa-anyjev-reqs" 2>/dev/null || true)" != "$want" ]; then
    if [ ! -x "$HOST_CUDA/bin/nvcc" ]; then
      echo "[install --arm64-cuda] $HOST_CUDA/bin/nvcc is missing: run scripts/install.sh" >&2
      exit 1
    fi
    log "aarch64 $torch_pin with every nvidia wheel it pins, and a cross nvcc, into $CUDA_DIR"
    wheels="$(mktemp -d)"
    # What pip resolves for the pin on aarch64: torch's and nvidia's wheels
    # alone (not triton, sympy, ...: nothing here runs Python).
    "$VENV/bin/python" "$HERE/pip_for_target.py" aarch64 "$pyver" install --dry-run \
      --ignore-installed -q --disable-pip-version-check --report "$wheels/report.json" "$torch_pin"
    mapfile -t pins < <("$VENV/bin/python" - "$wheels/report.json" <<'EOF'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if name == "torch" or name.startswith("nvidia-"):
        print(f"{name}=={version}")
EOF
)
    pip_get "$wheels" --no-deps "${pins[@]}"
    sudo_if_needed rm -rf "$CUDA_DIR"
    unpack "$CUDA_DIR" "torch/lib/libtorch_python" "$wheels"/*.whl
    rm -rf "$wheels"

    root="$CUDA_DIR/cuda-13.0"
    target="$root/targets/aarch64-linux"
    # Hard links where /opt is one file system, else a copy (afresh: a
    # half-made tree of links would nest the copy inside it).
    if ! sudo_if_needed cp -al "$HOST_CUDA" "$root" 2>/dev/null; then
      sudo_if_needed rm -rf "$root"
      sudo_if_needed cp -a "$HOST_CUDA" "$root"
    fi
    sudo_if_needed rm -rf "$root/targets/x86_64-linux"
    compilers="$(mktemp -d)"
    pip_get "$compilers" --no-deps -r "$HERE/cuda-compiler-requirements.txt"
    sudo_if_needed "$VENV/bin/python" - "$target" "$compilers"/*.whl <<'EOF'
import os, sys, zipfile
target, wheels = sys.argv[1], sys.argv[2:]
for path in wheels:
    with zipfile.ZipFile(path) as whl:
        for info in whl.infolist():
            for part in ("include", "lib"):
                prefix = f"nvidia/cu13/{part}/"
                if info.filename.startswith(prefix) and not info.is_dir():
                    out = os.path.join(target, part, info.filename[len(prefix):])
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    with whl.open(info) as src, open(out, "wb") as dst:
                        dst.write(src.read())
EOF
    sudo_if_needed ln -sfn libcudart.so.13 "$target/lib/libcudart.so"
    rm -rf "$compilers"
    # cuobjdump, a host program: the oldest wheel on PyPI (13.2) reads 13.0's cubins.
    tools="$(mktemp -d)"
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$tools" \
      nvidia-cuda-cuobjdump==13.2.86
    sudo_if_needed "$VENV/bin/python" - "$root/bin/cuobjdump" "$tools"/*.whl <<'EOF'
import os, sys, zipfile
out, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as whl:
    name = next(n for n in whl.namelist() if n.endswith("/bin/cuobjdump"))
    with whl.open(name) as src, open(out, "wb") as dst:
        dst.write(src.read())
os.chmod(out, 0o755)
EOF
    rm -rf "$tools"
    sudo_if_needed chmod -R a+rX "$CUDA_DIR"
    echo "$want" | sudo_if_needed tee "$CUDA_DIR/.mesa-anyjev-reqs" >/dev/null
  else
    log "aarch64 $torch_pin whole and the cross nvcc: up to date"
  fi
fi

# A qemu-user prefix that shows the GB10's CPU: an arm64 /proc/cpuinfo
# (libtorch's CPU detection reads it and crashes on the host's x86 text)
# and each CPU's MIDR_EL1 in sysfs (oneDNN's xbyak_aarch64 reads it, else
# prints "Can't open MIDR_EL1 sysfs entry"): a Cortex-X925, implementer
# 0x41, part 0xd85, r0p1. qemu -L looks there first and falls back to /
# for every other file.
prefix="$ARM64/qemu-prefix"
cpus="$(getconf _NPROCESSORS_CONF)"
cpuinfo="$(for cpu in $(seq 0 $((cpus - 1))); do
  printf 'processor\t: %s\nBogoMIPS\t: 2000.00\nFeatures\t: %s\n' "$cpu" \
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 flagm2 frint svei8mm svebf16 i8mm bf16 dgh rng bti"
  printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd85\nCPU revision\t: 1\n\n'
done)"
midr="$prefix/sys/devices/system/cpu/cpu$((cpus - 1))/regs/identification/midr_el1"
if [ "$(cat "$prefix/proc/cpuinfo" 2>/dev/null || true)" != "$cpuinfo" ] || [ ! -s "$midr" ]; then
  log "qemu prefix with an arm64 /proc/cpuinfo and MIDR_EL1: $prefix"
  sudo_if_needed rm -rf "$prefix"
  sudo_if_needed mkdir -p "$prefix/proc"
  printf '%s\n' "$cpuinfo" | sudo_if_needed tee "$prefix/proc/cpuinfo" >/dev/null
  for cpu in $(seq 0 $((cpus - 1))); do
    dir="$prefix/sys/devices/system/cpu/cpu$cpu/regs/identification"
    sudo_if_needed mkdir -p "$dir"
    echo 0x00000000410fd851 | sudo_if_needed tee "$dir/midr_el1" >/dev/null
  done
else
  log "qemu prefix: up to date"
fi
