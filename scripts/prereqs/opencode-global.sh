#!/usr/bin/env bash
# opencode installed as a user installs it (`npm i -g opencode-ai`), into a test prefix:
# <repo>/.cache/opencode-global (bin/opencode on its own, nothing else of the checkout).
# The extension test run `vsix` (test/vscode/runs.mjs) puts only this prefix's bin/ on the
# PATH of a code-server that has the packaged forge.vsix installed, proving that the
# installed extension finds a global opencode. The version is the one package.json pins.
# Idempotent (a no-op once installed). When it cannot install: fails under CI=true,
# otherwise warns and exits 0 (the vsix run then fails and says to run this script).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PREFIX="$REPO_ROOT/.cache/opencode-global"
VERSION="$(node -p "require('$REPO_ROOT/package.json').dependencies['opencode-ai']")"
MARKER="$PREFIX/.installed-version"

say() { echo "[prereq opencode-global] $*" >&2; }
cannot() {
  if [ "${CI:-}" = "true" ]; then
    echo "[prereq opencode-global] ERROR: $*" >&2
    exit 1
  fi
  say "WARNING: $* (the extension-test run 'vsix' will fail until this is fixed)"
  exit 0
}

if [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$VERSION" ] && [ -x "$PREFIX/bin/opencode" ]; then
  exit 0
fi
command -v npm >/dev/null 2>&1 || cannot "npm is not on PATH: cannot install opencode-ai $VERSION globally into $PREFIX"
say "npm install --global --prefix $PREFIX opencode-ai@$VERSION"
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
# --prefer-offline: the checkout's own install usually left opencode in npm's cache.
if ! npm install --global --prefix "$PREFIX" --prefer-offline --no-audit --no-fund --loglevel=error "opencode-ai@$VERSION" >&2; then
  cannot "npm install --global --prefix $PREFIX opencode-ai@$VERSION failed"
fi
out="$("$PREFIX/bin/opencode" --version 2>&1)" || cannot "the installed $PREFIX/bin/opencode does not run: $out"
echo "$VERSION" >"$MARKER"
say "opencode $out installed in $PREFIX/bin"
