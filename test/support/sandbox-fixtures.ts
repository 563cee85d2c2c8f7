/**
 * Real-runtime fixtures for the sandbox tests: prerequisites (through the project's own
 * scripts, so a fresh machine installs and starts what is missing), a git repository with
 * a linked worktree in a temporary folder, and a TCP listener on the host's 127.0.0.1.
 *
 * Temporary folders live under `.cache/sandbox-test-tmp/`, not /tmp: a sandbox has its
 * own private /tmp, so a worktree under /tmp would hide "next to the worktree" writes.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SandboxLimits } from '../../src/core/sandbox/types';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const TEST_IMAGE = process.env.FORGE_SANDBOX_TEST_IMAGE ?? 'forge-sandbox:test';
export const SMALL_LIMITS: SandboxLimits = { cpus: 1, memoryMb: 256, pids: 128 };

function runPrereq(script: string, env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(path.join(REPO_ROOT, 'scripts', 'prereqs', script), [], { env, encoding: 'utf8', timeout: 15 * 60_000 });
  if (r.status !== 0) {
    throw new Error(`scripts/prereqs/${script} failed (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
  }
  return r.stdout;
}

/** Installs/starts Docker and the test image; returns the environment for the docker CLI. */
export function dockerPrereqs(): NodeJS.ProcessEnv {
  const out = runPrereq('docker.sh');
  const line = out.trim().split('\n').pop() ?? '';
  const m = /^DOCKER_HOST=(.+)$/.exec(line);
  if (!m) throw new Error(`scripts/prereqs/docker.sh did not print DOCKER_HOST=…: ${out}`);
  const env = { ...process.env, DOCKER_HOST: m[1] };
  runPrereq('sandbox-image.sh', env);
  return env;
}

/** Installs Podman and imports the test image into it. */
export function podmanPrereqs(): NodeJS.ProcessEnv {
  runPrereq('sandbox-podman.sh');
  return { ...process.env };
}

export function bwrapPrereqs(): void {
  runPrereq('bwrap.sh');
}

export interface SandboxTestDirs {
  base: string;
  /** A linked git worktree (its `.git` is a file pointing into the main repository). */
  worktreeDir: string;
  mainRepo: string;
  gitCommonDir: string;
  /** A folder beside the worktree that sandboxes must not be able to write. */
  siblingDir: string;
  stateDir: string;
  shimRoot: string;
  cleanup(): void;
}

/**
 * Where sandbox tests put their folders: `.cache/sandbox-test-tmp/` of the checkout, unless
 * the checkout itself is under /tmp (a sandbox's private /tmp would take "outside the
 * worktree" writes there and hide them from the test); then a folder in the user's cache.
 */
export function sandboxTestTempRoot(): string {
  const underTmp = (dir: string) => dir === '/tmp' || dir.startsWith('/tmp/') || dir === os.tmpdir() || dir.startsWith(`${os.tmpdir()}/`);
  const root = underTmp(REPO_ROOT) ? path.join(os.homedir(), '.cache', 'forge-sandbox-test-tmp') : path.join(REPO_ROOT, '.cache', 'sandbox-test-tmp');
  mkdirSync(root, { recursive: true });
  // Its real path: a sandbox binds the worktree by the path it is given, while a shell started in it
  // reports the real one as $PWD (a checkout whose .cache is a symbolic link failed its chdir).
  return realpathSync(root);
}

export function makeSandboxTestDirs(label: string): SandboxTestDirs {
  const root = sandboxTestTempRoot();
  const base = mkdtempSync(path.join(root, `${label}-`));
  const mainRepo = path.join(base, 'repo');
  const worktrees = path.join(base, 'worktrees');
  const worktreeDir = path.join(worktrees, 'loop');
  const siblingDir = path.join(worktrees, 'sibling');
  mkdirSync(mainRepo, { recursive: true });
  mkdirSync(siblingDir, { recursive: true });
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Forge Test', '-c', 'user.email=forge@test.invalid', ...args], { cwd, stdio: 'pipe' });
  git(mainRepo, 'init', '-q', '-b', 'main');
  writeFileSync(path.join(mainRepo, 'README.md'), '# fixture\nneedle-in-readme\n');
  git(mainRepo, 'add', 'README.md');
  git(mainRepo, 'commit', '-q', '-m', 'initial');
  git(mainRepo, 'worktree', 'add', '-q', '-b', 'forge/loop', worktreeDir);
  const stateDir = path.join(base, 'forge-data', 'sandboxes');
  const shimRoot = path.join(base, 'forge-data', 'sandbox-shims');
  return {
    base,
    worktreeDir,
    mainRepo,
    gitCommonDir: path.join(mainRepo, '.git'),
    siblingDir,
    stateDir,
    shimRoot,
    cleanup: () => rmSync(base, { recursive: true, force: true }),
  };
}

export interface HostListener {
  port: number;
  connections(): number;
  close(): Promise<void>;
}

/** A TCP listener on the host's 127.0.0.1 that counts connections and answers "pong". */
export async function startHostListener(): Promise<HostListener> {
  let count = 0;
  const server: Server = createServer((socket) => {
    count++;
    socket.on('error', () => undefined);
    socket.end('pong\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('listener has no port');
  return {
    port: address.port,
    connections: () => count,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let counter = 0;
/** A loop name unique to this process and test, so parallel or leftover runs never collide. */
export function uniqueLoopName(label: string): string {
  counter++;
  return `t${process.pid}-${label}-${counter}`.toLowerCase().replace(/[^a-z0-9-]/g, '-');
}

/**
 * Runs `make` with `process.env.DOCKER_HOST` set to `dockerHost` (the project's own dockerd; left
 * as it is when undefined, as for podman) and restored afterwards: an engine made inside — the
 * loop harness builds the engine's environment from process.env — reaches that dockerd.
 */
export async function withDockerHost<T>(dockerHost: string | undefined, make: () => Promise<T>): Promise<T> {
  const saved = process.env.DOCKER_HOST;
  if (dockerHost) process.env.DOCKER_HOST = dockerHost;
  try {
    return await make();
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  }
}
