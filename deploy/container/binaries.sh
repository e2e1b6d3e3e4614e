#!/usr/bin/env bash
# This host's build as the image's binaries, for the runtime stage alone
# (make image-prebuilt; tests/e2e/test_container_image.py):
#
#   deploy/container/binaries.sh BUILD_DIR IMAGE
#
# collect.sh's pick, imported as IMAGE holding /out: the Containerfile's
# runtime stage copies from it with --build-arg BINARIES=IMAGE instead of
# from its build stage. BUILD_DIR must come from the same Debian release as
# the image's BASE (its package list names that release's packages).
# With docker: tar -C DIR -cf - out | docker import - IMAGE.
set -euo pipefail
BUILD_DIR="${1:?usage: binaries.sh BUILD_DIR IMAGE}"
IMAGE="${2:?usage: binaries.sh BUILD_DIR IMAGE}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# /var/tmp: on the torch wheel's file system here, so collect.sh hard-links.
work="$(mktemp -d "${TMPDIR:-/var/tmp}/mesa-anyjev-binaries.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bash "$HERE/collect.sh" "$BUILD_DIR" "$work/out"
tar -C "$work" -cf - out | "$HERE/podman.sh" import --quiet - "$IMAGE" >/dev/null
echo "$IMAGE"
