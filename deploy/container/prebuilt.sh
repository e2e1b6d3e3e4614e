#!/usr/bin/env bash
# The runtime stage alone, from a build on this host (make image-prebuilt;
# tests/e2e/test_container_image.py):
#
#   deploy/container/prebuilt.sh BUILD_DIR TAG [SUITE]
#
# collect.sh's pick goes to a folder that the Containerfile's runtime stage
# copies from as the build context named `binaries` (--build-context), so
# the build stage never runs and no image of the binaries is made (on vfs
# that image alone stored 3.7 GB, and importing it as much again). BUILD_DIR
# must come from the Debian release of SUITE (bookworm by default): its
# package list names that release's packages. Before building it checks the
# free space the commit needs (docs/build.md) and says so if short.
# docker: docker buildx build --build-context binaries=DIR --build-arg
# BINARIES=BASE ... with BASE the same debian image as BASE.
set -euo pipefail
BUILD_DIR="${1:?usage: prebuilt.sh BUILD_DIR TAG [SUITE]}"
TAG="${2:?usage: prebuilt.sh BUILD_DIR TAG [SUITE]}"
SUITE="${3:-bookworm}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PODMAN="$HERE/podman.sh"
log() { printf '[prebuilt] %s\n' "$*" >&2; }

base="$(bash "$HERE/base.sh" "$SUITE")"
# /var/tmp: on the torch wheel's file system here, so collect.sh hard-links.
work="$(mktemp -d "${TMPDIR:-/var/tmp}/mesa-anyjev-binaries.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bash "$HERE/collect.sh" "$BUILD_DIR" "$work/out"

# At its peak the commit holds the copied files about four times over,
# on overlay and vfs alike (the container's copy, the layer's tar and
# podman's copy of it in /var/tmp, the new layer): 13.9 and 14.2 GB for
# 3.7 GB, measured (docs/build.md).
payload=$(du -sb --apparent-size "$work/out" | cut -f1)
graph="$("$PODMAN" info --format '{{.Store.GraphRoot}}')"
need=$((payload * 4 + (512 << 20)))
mkdir -p "$graph"
free=$(df -B1 --output=avail "$graph" | tail -1)
if [ "$(stat -c %d "$graph")" != "$(stat -c %d /var/tmp)" ]; then
  free_tmp=$(df -B1 --output=avail /var/tmp | tail -1)
  [ "$free_tmp" -lt "$free" ] && free=$free_tmp
fi
if [ "$free" -lt "$need" ]; then
  log "not enough disk for the image: $((need >> 20)) MiB needed (4 x $((payload >> 20)) MiB" \
    "of binaries and libraries, plus 512), $((free >> 20)) MiB free under $graph and /var/tmp"
  exit 3
fi
"$PODMAN" build --layers=false --format docker --network host \
  -f "$HERE/Containerfile" --build-arg BASE="$base" --build-arg BINARIES="$base" \
  --build-context binaries="$work" -t "$TAG" "$HERE"
