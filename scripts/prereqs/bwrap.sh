#!/usr/bin/env bash
# Installs bubblewrap (and ripgrep, which the sandbox's search shim runs inside a bwrap
# sandbox built from the host's /usr) when missing, then checks that a sandbox starts.
set -euo pipefail
say() { echo "[prereq bwrap] $*" >&2; }
fail() { echo "[prereq bwrap] ERROR: $*" >&2; exit 1; }

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
command -v git >/dev/null 2>&1 || missing+=(git)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'"
  command -v apt-get >/dev/null 2>&1 || fail "missing ${missing[*]} and apt-get is not available"
  say "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || fail "apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2 || fail "apt-get install ${missing[*]} failed"
fi
out="$(bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
  --proc /proc --dev /dev --unshare-all --cap-drop ALL --die-with-parent -- /usr/bin/true 2>&1)" \
  || fail "bwrap is installed but cannot start a sandbox here: $out (user namespaces or mount namespaces may be disabled)"
say "bwrap $(bwrap --version | awk '{print $2}') works"
