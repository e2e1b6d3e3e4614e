#!/usr/bin/env bash
# What the image's runtime stage takes from a build, as the loader finds it:
#
#   deploy/container/collect.sh BUILD_DIR OUT_DIR
#
# OUT_DIR/root/opt/mesa-anyjev/bin  mesa-anyjevd and mesa-anyjev, stripped
# OUT_DIR/root/opt/mesa-anyjev/lib  the libraries `ldd` resolves into the
#                               torch wheel and its nvidia-* wheels (libtorch,
#                               c10, and for a CUDA torch what libtorch_cuda
#                               needs)
# OUT_DIR/root/etc/mesa-anyjev/ the image's configuration file
# OUT_DIR/packages              the Debian packages that own every other
#                               library `ldd` resolves (dpkg -S): the runtime
#                               stage installs exactly these
# OUT_DIR/root/ is copied onto the image's / as it is.
#
# Besides what ldd sees, two libraries load siblings by name at run time,
# from their own folder: cuDNN (libcudnn.so.9 loads libcudnn_graph, _ops,
# _engines_*, ...: torch's attention picks cuDNN on H100/H200) and NVRTC
# (libnvrtc-builtins, for the kernels libtorch compiles at run time). Those
# siblings come along, nothing else of the wheels.
#
# Used by the build stage (BUILD_DIR inside the image) and on a host whose
# build the runtime stage packs alone (make image-prebuilt, the image test).
set -euo pipefail
BUILD_DIR="${1:?usage: collect.sh BUILD_DIR OUT_DIR}"
OUT="${2:?usage: collect.sh BUILD_DIR OUT_DIR}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINARIES=("$BUILD_DIR/server/mesa-anyjevd" "$BUILD_DIR/client/mesa-anyjev")
log() { printf '[collect] %s\n' "$*" >&2; }

rm -rf "$OUT"
LIB="$OUT/root/opt/mesa-anyjev/lib"
mkdir -p "$OUT/root/opt/mesa-anyjev/bin" "$LIB" "$OUT/root/etc/mesa-anyjev"
for b in "${BINARIES[@]}"; do
  [ -x "$b" ] || { log "missing $b: build it first"; exit 1; }
  strip --strip-unneeded -o "$OUT/root/opt/mesa-anyjev/bin/$(basename "$b")" "$b"
done
install -m 0644 "$HERE/mesa-anyjevd.yaml" "$OUT/root/etc/mesa-anyjev/mesa-anyjevd.yaml"

# name path pairs of every library the loader resolves, all binaries at once.
resolved="$(ldd "${BINARIES[@]}" | awk '$2 == "=>" {print $1, $3}' | sort -u)"
if grep -q ' not$' <<<"$resolved"; then
  log "libraries the loader cannot find: $(grep ' not$' <<<"$resolved" | cut -d' ' -f1 | xargs)"
  exit 1
fi

wheel_lib() { case "$1" in */site-packages/torch/lib/*|*/site-packages/nvidia/*) return 0 ;; esac; return 1; }
# A hard link where OUT is on the wheels' file system (3.4 GB for a CUDA
# torch: seconds instead of a copy), else a copy.
take() {
  local dest="$LIB/${2:-$(basename "$1")}"
  ln -f "$(readlink -f "$1")" "$dest" 2>/dev/null || cp -L "$1" "$dest"
}
packages=()
while read -r name path; do
  if wheel_lib "$path"; then
    take "$path" "$name"
    case "$name" in
      libcudnn.so.*) for f in "$(dirname "$path")"/libcudnn_*.so.*; do take "$f"; done ;;
      libnvrtc.so.*) for f in "$(dirname "$path")"/libnvrtc-builtins.so.*; do take "$f"; done ;;
    esac
    continue
  fi
  # Debian's merged /usr: ldd says /lib/..., dpkg knows /usr/lib/...
  real="$(readlink -f "$path")"
  owner="$( { dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || true; } |
    head -n1)"
  [ -n "$owner" ] || { log "no Debian package owns $path ($name)"; exit 1; }
  packages+=("${owner%%:*}")
done <<<"$resolved"
printf '%s\n' "${packages[@]}" | sort -u >"$OUT/packages"
chmod -R a+rX "$OUT"
log "$(wc -l <"$OUT/packages") Debian packages; $(ls "$LIB" | wc -l) wheel libraries," \
  "$(du -sh "$LIB" | cut -f1); binaries $(du -sh "$OUT/root/opt/mesa-anyjev/bin" | cut -f1)"
