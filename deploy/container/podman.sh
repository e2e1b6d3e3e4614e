#!/usr/bin/env bash
# podman as this project runs it where there is no Docker daemon and no
# registry (shared/spec/platform.md section 2): runc, cgroupfs and lowered
# ulimits from containers.conf beside this file, the vfs storage driver.
# Docker users run `docker` instead; nothing here is needed on the GB10.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$HERE/containers.conf}"
exec podman --storage-driver "${MESA_ANYJEV_STORAGE_DRIVER:-vfs}" "$@"
