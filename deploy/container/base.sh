#!/usr/bin/env bash
# A Debian base image for podman where no registry is reachable
# (docs/build.md): debootstrap's minbase against the
# mirror apt already uses, imported as localhost/SUITE-minbase:KEY.
#
#   deploy/container/base.sh SUITE      # bookworm | trixie; prints the image
#
# KEY hashes the suite, the architecture, the mirrors and this script, and
# the root file system is kept as a tar in $MESA_ANYJEV_BASE_CACHE
# (/var/cache/mesa-anyjev/container-bases): a second run, from any clone,
# finds the image in podman's store or imports the tar (seconds) instead of
# running debootstrap again (about 100 s).
set -euo pipefail
SUITE="${1:?usage: deploy/container/base.sh SUITE (bookworm or trixie)}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PODMAN="$HERE/podman.sh"
CACHE="${MESA_ANYJEV_BASE_CACHE:-/var/cache/mesa-anyjev/container-bases}"
log() { printf '[base] %s\n' "$*" >&2; }

# The host's own mirrors (deb822 sources, as Debian 12 and 13 write them).
sources=/etc/apt/sources.list.d/debian.sources
uri_of() {  # 1: the security archive's URI, 0: the main archive's
  awk -v sec="$1" '/^URIs:/{u=$2} /^Suites:/{if ((/-security/ ? 1 : 0) == sec) {print u; exit}}' \
    "$sources" 2>/dev/null || true
}
MIRROR="${MESA_ANYJEV_DEBIAN_MIRROR:-$(uri_of 0)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
SECURITY="${MESA_ANYJEV_DEBIAN_SECURITY:-$(uri_of 1)}"
SECURITY="${SECURITY:-http://deb.debian.org/debian-security}"
ARCH="$(dpkg --print-architecture)"

key="$( { printf '%s\n' "$SUITE" "$ARCH" "$MIRROR" "$SECURITY"; cat "$0"; } |
  sha256sum | cut -c1-12)"
image="localhost/$SUITE-minbase:$key"
if "$PODMAN" image exists "$image"; then
  echo "$image"
  exit 0
fi

tar="$CACHE/$SUITE-$ARCH-$key.tar"
if [ ! -s "$tar" ]; then
  command -v debootstrap >/dev/null ||
    { log "debootstrap is missing: run scripts/install.sh (or apt-get install debootstrap)"; exit 2; }
  root="$(mktemp -d /var/tmp/mesa-anyjev-base.XXXXXX)"
  trap 'rm -rf "$root"' EXIT
  log "debootstrap --variant=minbase $SUITE from $MIRROR (about 100 s)"
  start=$SECONDS
  debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 ||
    { tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
  rm -f "$root.log"
  # The release, its updates and its security fixes, as Debian's own images
  # list them: a build stage installs today's packages, not the release's.
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  chmod 0755 "$root"  # mktemp's 0700 would become the image's / and lock out non-root users
  mkdir -p "$CACHE"
  tar -C "$root" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
  log "debootstrap took $((SECONDS - start)) s; cached as $tar ($(du -h "$tar" | cut -f1))"
fi
# What Debian's own images set; an imported tar has no configuration at all.
"$PODMAN" import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' "$tar" "$image" >/dev/null
"$PODMAN" tag "$image" "localhost/$SUITE-minbase:latest"
log "imported $image"
echo "$image"
