#!/usr/bin/env bash
# Builds Forge's sandbox test image (default tag forge-sandbox:test) once and reuses it.
# No registry is reachable on the test machines, so instead of `docker build` from
# container/Dockerfile this makes a Debian bookworm rootfs with debootstrap (packages come
# from the Debian mirror apt already uses), caches it as a tarball under .cache/, and
# `docker import`s it. The image carries what the sandbox tests and the search shim need:
# bash, coreutils, git, ripgrep, procps, plus a non-root user `agent` (uid 1000).
# Env: FORGE_SANDBOX_ENGINE (docker|podman, default docker), FORGE_SANDBOX_TEST_IMAGE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENGINE="${FORGE_SANDBOX_ENGINE:-docker}"
TAG="${FORGE_SANDBOX_TEST_IMAGE:-forge-sandbox:test}"
CACHE="$ROOT/.cache/sandbox-image"
TARBALL="$CACHE/rootfs-bookworm-v1.tar"
MIRROR="${FORGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="bash,coreutils,git,ripgrep,procps,ca-certificates,findutils,grep,sed"

say() { echo "[prereq sandbox-image] $*" >&2; }
fail() { echo "[prereq sandbox-image] ERROR: $*" >&2; exit 1; }

if [ "$ENGINE" = docker ] && [ -z "${DOCKER_HOST:-}" ]; then
  eval "export $("$ROOT/scripts/prereqs/docker.sh" | tail -n 1)"
fi
command -v "$ENGINE" >/dev/null 2>&1 || fail "$ENGINE is not installed (run scripts/prereqs/docker.sh)"

if "$ENGINE" image inspect "$TAG" >/dev/null 2>&1; then
  say "$TAG already present in $ENGINE"
  exit 0
fi

if [ ! -s "$TARBALL" ]; then
  [ "$(id -u)" = 0 ] || fail "building the rootfs needs root (debootstrap)"
  if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || fail "apt-get update failed"
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >&2 || fail "apt-get install debootstrap failed"
  fi
  mkdir -p "$CACHE"
  ROOTFS="$CACHE/rootfs.tmp"
  rm -rf "$ROOTFS"
  say "debootstrap bookworm ($PACKAGES) into $ROOTFS (about a minute)"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 20 "$CACHE/debootstrap.log" >&2; fail "debootstrap failed (log: $CACHE/debootstrap.log)"; }
  chroot "$ROOTFS" /usr/sbin/useradd --create-home --uid 1000 --shell /bin/bash agent
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
  tar -C "$ROOTFS" -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$ROOTFS"
  say "cached rootfs at $TARBALL"
fi

say "importing $TARBALL as $TAG into $ENGINE"
"$ENGINE" import \
  --change 'USER agent' --change 'WORKDIR /home/agent' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["sleep","infinity"]' \
  "$TARBALL" "$TAG" >/dev/null || fail "$ENGINE import failed"
say "built $TAG"
