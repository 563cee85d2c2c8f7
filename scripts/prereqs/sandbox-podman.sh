#!/usr/bin/env bash
# Installs Podman (rootful, with runc and catatonit for --init) when missing and imports
# Forge's sandbox test image into it (through sandbox-image.sh, which reuses the cached rootfs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
say() { echo "[prereq podman] $*" >&2; }
fail() { echo "[prereq podman] ERROR: $*" >&2; exit 1; }

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/libexec/podman/catatonit ] || [ -x /usr/bin/catatonit ] || missing+=(catatonit)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'"
  command -v apt-get >/dev/null 2>&1 || fail "missing ${missing[*]} and apt-get is not available"
  say "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || fail "apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2 || fail "apt-get install ${missing[*]} failed"
fi
timeout 30 podman info --format '{{.Host.OCIRuntime.Name}}' >/dev/null 2>&1 || fail "podman is installed but 'podman info' fails: $(podman info 2>&1 | tail -n 3)"
say "podman $(podman --version | awk '{print $3}') works"
FORGE_SANDBOX_ENGINE=podman "$ROOT/scripts/prereqs/sandbox-image.sh"
