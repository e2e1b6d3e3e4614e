#!/usr/bin/env bash
# podman as this project runs it where there is no Docker daemon and no
# registry (docs/build.md): runc, cgroupfs and lowered
# ulimits from containers.conf beside this file. Docker users run `docker`
# instead; nothing here is needed on the GB10.
#
# The storage driver: MESA_ANYJEV_STORAGE_DRIVER if set, else overlay where
# the kernel mounts it here (a trial mount, milliseconds), else vfs. overlay
# shares an image's layers with its containers and the next layer; vfs copies
# the whole file system for every layer and every container (the image test
# needs about 19 GB free on vfs against 11 on overlay, docs/build.md). A
# store refuses a driver other than the one that made it, so overlay keeps
# its own (/var/lib/containers/storage-overlay) and vfs podman's default.
# MESA_ANYJEV_PODMAN_ROOT: a store of its own under that folder instead (the
# image test's, removed with it).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"

overlay_mounts() {
  [ "$(id -u)" = 0 ] || return 1
  local t rc=1
  t="$(mktemp -d)" || return 1
  mkdir "$t/lower" "$t/upper" "$t/work" "$t/merged"
  if mount -t overlay overlay -o "lowerdir=$t/lower,upperdir=$t/upper,workdir=$t/work" \
       "$t/merged" 2>/dev/null; then
    umount "$t/merged" && rc=0
  fi
  rm -rf "$t"
  return $rc
}

driver="${MESA_ANYJEV_STORAGE_DRIVER:-}"
if [ -z "$driver" ]; then
  if overlay_mounts; then driver=overlay; else driver=vfs; fi
fi
store=()
if [ -n "${MESA_ANYJEV_PODMAN_ROOT:-}" ]; then
  store=(--root "$MESA_ANYJEV_PODMAN_ROOT/storage" --runroot "$MESA_ANYJEV_PODMAN_ROOT/run")
elif [ "$driver" = overlay ]; then
  store=(--root /var/lib/containers/storage-overlay --runroot /run/containers/storage-overlay)
fi
exec podman --storage-driver "$driver" "${store[@]}" "$@"
