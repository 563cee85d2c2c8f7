#!/usr/bin/env bash
# Installs Docker (docker.io) when missing and starts a private dockerd for Forge's
# sandbox tests on a socket under .cache/docker/, reusing it when it already answers.
# Prints the DOCKER_HOST to use on its last line: `DOCKER_HOST=unix://…`.
# `docker.sh --stop` stops that daemon (by its PID) when it runs.
# The system service cannot be started on the test machines, so the daemon is ours:
# no bridge and no iptables rules (Forge's sandboxes use `--network none` or `host`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE="${FORGE_DOCKER_DIR:-$ROOT/.cache/docker}"
SOCK="$BASE/run/docker.sock"
export DOCKER_HOST="unix://$SOCK"

say() { echo "[prereq docker] $*" >&2; }
fail() { echo "[prereq docker] ERROR: $*" >&2; exit 1; }

if ! command -v dockerd >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || fail "dockerd is missing and installing it needs root: run 'sudo apt-get install -y docker.io'"
  command -v apt-get >/dev/null 2>&1 || fail "dockerd is missing and apt-get is not available: install Docker Engine yourself"
  say "installing docker.io (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || fail "apt-get update failed"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends docker.io >&2 || fail "apt-get install docker.io failed"
fi
# Debian's docker.io ships the client as /usr/bin/docker; any docker client on PATH will do.
command -v docker >/dev/null 2>&1 || fail "no docker client on PATH after installing docker.io"

answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if [ "${1:-}" = "--stop" ]; then
  if [ -f "$BASE/dockerd.pid" ] && kill -0 "$(cat "$BASE/dockerd.pid")" 2>/dev/null; then
    say "stopping dockerd (pid $(cat "$BASE/dockerd.pid"))"
    kill "$(cat "$BASE/dockerd.pid")"
    for _ in $(seq 1 40); do kill -0 "$(cat "$BASE/dockerd.pid")" 2>/dev/null || break; sleep 0.5; done
  else
    say "no private dockerd is running"
  fi
  rm -f "$BASE/dockerd.pid"
  exit 0
fi

if answers; then
  say "dockerd already answers on $SOCK"
else
  mkdir -p "$BASE/run" "$BASE/data" "$BASE/exec"
  if [ -f "$BASE/dockerd.pid" ] && kill -0 "$(cat "$BASE/dockerd.pid")" 2>/dev/null; then
    say "dockerd (pid $(cat "$BASE/dockerd.pid")) is running but does not answer yet; waiting"
  else
    rm -f "$SOCK" "$BASE/exec/docker.pid"
    say "starting dockerd on $SOCK (data under $BASE, log $BASE/dockerd.log)"
    # setsid: the daemon must outlive this script and the test run that called it.
    setsid dockerd \
      --data-root "$BASE/data" --exec-root "$BASE/exec" --pidfile "$BASE/exec/docker.pid" \
      -H "unix://$SOCK" --bridge none --iptables=false --ip6tables=false \
      >>"$BASE/dockerd.log" 2>&1 </dev/null &
    echo $! >"$BASE/dockerd.pid"
  fi
  for _ in $(seq 1 60); do
    answers && break
    sleep 0.5
  done
  answers || { tail -n 20 "$BASE/dockerd.log" >&2 || true; fail "dockerd did not answer on $SOCK within 30 s (log above)"; }
  say "dockerd is up (pid $(cat "$BASE/dockerd.pid"))"
fi
echo "DOCKER_HOST=$DOCKER_HOST"
