#!/usr/bin/env bash
# Installs Python's venv module and pytest from the system packages when missing: the worktree
# setup tests (issue 27) make a project tested with pytest in a `/usr/bin/python3 -m venv
# --system-site-packages` virtualenv. Debian's python3 (not one on PATH from pyenv or the like
# under a home folder, which a sandbox does not show).
set -euo pipefail
say() { echo "[prereq python-pytest] $*" >&2; }
fail() { echo "[prereq python-pytest] ERROR: $*" >&2; exit 1; }

missing=()
py=/usr/bin/python3
[ -x "$py" ] || missing+=(python3)
"$py" -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
"$py" -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'"
  command -v apt-get >/dev/null 2>&1 || fail "missing ${missing[*]} and apt-get is not available"
  say "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || fail "apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2 || fail "apt-get install ${missing[*]} failed"
fi
"$py" -c 'import pytest, venv' || fail "$py still lacks pytest or venv"
say "$py $("$py" -c 'import sys; print(sys.version.split()[0])'), pytest $("$py" -c 'import pytest; print(pytest.__version__)')"
