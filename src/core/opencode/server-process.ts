/**
 * One `opencode serve` process owned by Forge: found, configured, started, awaited, stopped.
 * Supervision (restart with back-off) is layered on top in `server-supervisor.ts`.
 *
 * - Bound to 127.0.0.1 on a free port.
 * - Only Forge may drive it: opencode's HTTP Basic authentication
 *   (`OPENCODE_SERVER_USERNAME`/`OPENCODE_SERVER_PASSWORD`) with a fresh random password per
 *   process. Another local user or process cannot guess it; a browser page cannot either, and
 *   opencode refuses requests without it. The password never leaves Forge's memory.
 * - Offline-safe: no update check, no sharing, no models.dev fetch, no LSP downloads.
 * - Forge's configuration arrives inline (`OPENCODE_CONFIG_CONTENT`), merged by opencode after
 *   the user's global config and `OPENCODE_CONFIG`, so Forge writes no file and the user's
 *   providers, credentials and settings keep working. A loop's server reads no project
 *   configuration from the directory it serves (loop-opencode.ts, project-config.ts).
 * - Spawned detached in its own process group; stopping kills the whole group. opencode runs
 *   each bash command in a new session (setsid), so those escape the group; every process of
 *   the server carries a per-process marker in its environment (inherited by whatever it
 *   starts, double forks included), and stopping also kills every process carrying it
 *   (Linux, via /proc). Nothing the agents started outlives the server.
 * - A guardian process (server-guardian.ts) does the same when Forge itself dies without
 *   stopping the server (SIGKILL, a crashed extension host): opencode never outlives Forge.
 */
import { signalMarkedProcesses } from '../process/marked-processes';
import { findOpencodeOnPath, opencodeNotFoundMessage } from './binary-discovery';
import { startServerGuardian } from './server-guardian';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { arch, platform, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { signalProcessGroup, startProcess } from '../process/process-runner';

export interface OpencodeEndpoint {
  /** `http://127.0.0.1:PORT` */
  url: string;
  username: string;
  password: string;
}

export const OFFLINE_ENVIRONMENT: Readonly<Record<string, string>> = Object.freeze({
  OPENCODE_DISABLE_AUTOUPDATE: '1',
  OPENCODE_DISABLE_SHARE: '1',
  OPENCODE_DISABLE_MODELS_FETCH: '1',
  OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
});

export const FORGE_SERVER_USERNAME = 'forge';

/**
 * The memory JavaScriptCore (opencode runs on Bun) sizes its garbage collection by. It reads the
 * machine's RAM and, on a machine of more than 4 GiB, lets a heap double at every collection
 * however large it grows (a "small" heap is one under a quarter of the RAM). A server that serves
 * many loops holds a heap of gigabytes, so Forge starts it as if the machine had at most 4 GiB:
 * past 1 GiB its heap grows by half, past 2 GiB by a quarter, and the collector runs sooner.
 * Measured A/B in one sitting (bench:parallel, three runs each, 24 GiB machine): 16 loops at
 * once on one shared server peaked at 2101 MB against 2361 MB (1932 against 2139 MB when the
 * first loop was already running); one loop's wall time 5.45–6.70 s against 5.49–8.28 s (eight
 * runs each, alternating): a small heap grows as before. A value the user set is kept.
 */
export const OPENCODE_HEAP_RAM_BYTES = 4 * 2 ** 30;
const JSC_RAM_SIZE_VARIABLE = 'BUN_JSC_forceRAMSize';

/** Environment variable whose value marks every process of one Forge-started opencode server. */
export const PROCESS_MARKER_VARIABLE = 'FORGE_OPENCODE_INSTANCE';

export class OpencodeStartError extends Error {
  constructor(
    message: string,
    /** What opencode printed (stdout and stderr), last part. */
    readonly output: string,
  ) {
    super(output.trim() ? `${message}\nopencode said:\n${stripAnsi(output).trim()}` : message);
    this.name = 'OpencodeStartError';
  }
}

export function stripAnsi(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
}

export interface ResolveBinaryOptions {
  /** A user-configured binary path (setting `forge.opencode.binaryPath`). */
  configuredPath?: string;
  /** Folders to resolve the `opencode-ai` package from (default: this module's folder and the cwd). */
  searchFrom?: string[];
}

/**
 * The opencode binary: the configured path, else the one the `opencode-ai` dependency installs
 * (its postinstall links the platform binary to `opencode-ai/bin/opencode.exe`), else the
 * platform package's binary, else `opencode` on PATH or in the global npm folders.
 */
export function resolveOpencodeBinary(options: ResolveBinaryOptions = {}): string {
  if (options.configuredPath) {
    if (!isExecutable(options.configuredPath)) {
      throw new OpencodeStartError(
        `The opencode binary "${options.configuredPath}" (setting forge.opencode.binaryPath) does not exist or is not executable. Fix the path, or clear the setting to use an installed opencode.`,
        '',
      );
    }
    return options.configuredPath;
  }
  const searchFrom = options.searchFrom ?? defaultSearchFolders();
  const os = platform() === 'win32' ? 'windows' : platform();
  const packages = [`opencode-${os}-${arch()}`, `opencode-${os}-${arch()}-baseline`, `opencode-${os}-${arch()}-musl`, `opencode-${os}-${arch()}-baseline-musl`];
  const binaryName = os === 'windows' ? 'opencode.exe' : 'opencode';
  for (const folder of searchFrom) {
    const require = createRequire(join(folder, 'noop.js'));
    const wrapper = tryResolve(require, 'opencode-ai/package.json');
    if (wrapper) {
      const linked = join(dirname(wrapper), 'bin', 'opencode.exe');
      if (isExecutable(linked)) return linked;
    }
    for (const name of packages) {
      const pkg = tryResolve(require, `${name}/package.json`);
      if (pkg && isExecutable(join(dirname(pkg), 'bin', binaryName))) return join(dirname(pkg), 'bin', binaryName);
    }
  }
  // An installed extension carries no node_modules: an opencode the user installed.
  const installed = findOpencodeOnPath();
  if (installed) return installed;
  throw new OpencodeStartError(opencodeNotFoundMessage(searchFrom), '');
}

function defaultSearchFolders(): string[] {
  const folders = [process.cwd()];
  if (typeof __dirname === 'string') folders.unshift(__dirname);
  return folders;
}

function tryResolve(require: NodeJS.Require, id: string): string | undefined {
  try {
    return require.resolve(id);
  } catch {
    return undefined;
  }
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return existsSync(path);
  } catch {
    return false;
  }
}

export interface OpencodeEnvironmentInput {
  /** The user's environment (provider keys, `OPENCODE_CONFIG`, PATH …); default `process.env`. */
  baseEnv?: NodeJS.ProcessEnv;
  /** Set last, over everything (tests use it for HOME/XDG isolation). */
  extraEnv?: Record<string, string>;
  /** Forge's configuration layer (agents, permissions, its MCP server). */
  forgeConfig?: Record<string, unknown>;
  username: string;
  password: string;
}

export function buildOpencodeEnvironment(input: OpencodeEnvironmentInput): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(input.baseEnv ?? process.env)) if (value !== undefined) env[key] = value;
  Object.assign(env, OFFLINE_ENVIRONMENT);
  env[JSC_RAM_SIZE_VARIABLE] ??= String(Math.min(totalmem(), OPENCODE_HEAP_RAM_BYTES));
  env.OPENCODE_SERVER_USERNAME = input.username;
  env.OPENCODE_SERVER_PASSWORD = input.password;
  if (input.forgeConfig) {
    // A user's own inline configuration is kept: Forge's layer merges over it.
    const userInline = parseJsonObject(env.OPENCODE_CONFIG_CONTENT);
    env.OPENCODE_CONFIG_CONTENT = JSON.stringify(deepMerge(userInline ?? {}, input.forgeConfig));
  }
  Object.assign(env, input.extraEnv ?? {});
  return env;
}

/** An inline JSON configuration as an object; undefined when absent or not a JSON object. */
export function parseJsonObject(text: string | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const existing = result[key];
    result[key] = isPlainObject(existing) && isPlainObject(value) ? deepMerge(existing, value) : value;
  }
  return result;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Folders opencode keeps its own files in that an agent may need to read: the tool-output
 * folder (truncated tool output is saved there for the agent to page through).
 */
export function opencodeOwnDirectories(env: Record<string, string | undefined>): string[] {
  const home = env.HOME ?? process.env.HOME ?? '';
  const dataHome = env.XDG_DATA_HOME || join(home, '.local', 'share');
  return [join(dataHome, 'opencode', 'tool-output')];
}

export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

export interface OpencodeProcessOptions {
  binaryPath: string;
  /** Working directory of the server: the worktree (opencode's default project directory). */
  cwd: string;
  baseEnv?: NodeJS.ProcessEnv;
  extraEnv?: Record<string, string>;
  forgeConfig?: Record<string, unknown>;
  /** Default 60 s: a cold start on a busy machine can take far longer than the usual 2–3 s. */
  startTimeoutMs?: number;
  logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
}

export interface OpencodeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface OpencodeProcess {
  readonly endpoint: OpencodeEndpoint;
  readonly pid: number;
  /** Resolves when the process has exited (for whatever reason). */
  readonly exited: Promise<OpencodeExit>;
  isRunning(): boolean;
  /** The last lines opencode printed. */
  outputTail(): string;
  /** Value of `FORGE_OPENCODE_INSTANCE` in the environment of this server and all it starts. */
  readonly marker: string;
  /** SIGTERM to the process group, SIGKILL after `graceMs` (default 5 s); always kills the group. */
  stop(graceMs?: number): Promise<void>;
}

const OUTPUT_TAIL_CHARS = 8_000;
const LISTENING = /opencode server listening on (https?:\/\/\S+)/;

export async function startOpencodeProcess(options: OpencodeProcessOptions): Promise<OpencodeProcess> {
  const port = await findFreePort();
  const password = randomBytes(24).toString('base64url');
  const marker = randomBytes(12).toString('hex');
  const env = buildOpencodeEnvironment({
    baseEnv: options.baseEnv,
    extraEnv: options.extraEnv,
    forgeConfig: options.forgeConfig,
    username: FORGE_SERVER_USERNAME,
    password,
  });
  env[PROCESS_MARKER_VARIABLE] = marker;
  const args = ['serve', '--hostname', '127.0.0.1', '--port', String(port), '--print-logs', '--log-level', options.logLevel ?? 'WARN'];
  const started = startProcess(options.binaryPath, args, { cwd: options.cwd, env, processGroup: true });
  const child = started.child;
  if (!child) throw new OpencodeStartError(`Could not start opencode (${options.binaryPath}): ${String((await started.spawnFailed).cause)}`, '');
  let tail = '';
  let exit: OpencodeExit | undefined;
  const exited = started.exited.then(({ exitCode, signal }) => (exit = { code: exitCode, signal }));
  const lineBuffers = { stdout: '', stderr: '' };
  const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    tail = (tail + text).slice(-OUTPUT_TAIL_CHARS);
    lineBuffers[stream] += text;
    const lines = lineBuffers[stream].split('\n');
    lineBuffers[stream] = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim()) options.onOutput?.(line, stream);
      listeners.forEach((listener) => listener(line));
    }
  };
  const listeners = new Set<(line: string) => void>();
  child.stdout?.on('data', onData('stdout'));
  child.stderr?.on('data', onData('stderr'));
  const spawnError = started.spawnFailed;

  const pid = started.pid;
  // Kills the server should Forge die without stopping it (a SIGKILL, a crash of the host).
  const { [PROCESS_MARKER_VARIABLE]: _marker, ...guardianEnv } = env;
  void _marker;
  const guardian = pid === undefined ? undefined : startServerGuardian(pid, `${PROCESS_MARKER_VARIABLE}=${marker}`, guardianEnv);
  const stop = async (graceMs = 5_000) => {
    if (pid === undefined) return;
    signalProcessGroup(pid, 'SIGTERM');
    const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
    await Promise.race([exited, timer]);
    // Whatever the main process did, nothing of its group may survive it.
    signalProcessGroup(pid, 'SIGKILL');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    // SIGKILL is delivered, not awaited: a killed child can still be tearing down (holding its
    // working folder, which the caller may be about to remove) when the main process has exited.
    // Stopped means gone, so wait until no process of this server is left (zombies count as gone).
    const deadline = Date.now() + 2_000;
    while (killMarkedProcesses(marker) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await guardian?.stop();
  };

  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new OpencodeStartError(`opencode did not start listening within ${Math.round(timeoutMs / 1000)} s.`, tail));
    }, timeoutMs);
    const onLine = (line: string) => {
      const match = LISTENING.exec(line);
      if (match?.[1]) {
        cleanup();
        resolve(match[1]);
      }
    };
    const cleanup = () => {
      clearTimeout(timer);
      listeners.delete(onLine);
    };
    listeners.add(onLine);
    void exited.then((result) => {
      cleanup();
      reject(new OpencodeStartError(`opencode exited during start (code ${result.code}, signal ${result.signal}).`, tail));
    });
    void spawnError.then((error) => {
      cleanup();
      reject(new OpencodeStartError(`Could not start opencode (${options.binaryPath}): ${error.message}`, tail));
    });
  }).catch(async (error: unknown) => {
    await stop(1_000);
    throw error;
  });

  const endpoint: OpencodeEndpoint = { url: url.replace(/\/+$/, ''), username: FORGE_SERVER_USERNAME, password };
  try {
    await waitForHealth(endpoint, exited, timeoutMs);
    // opencode reads the configuration of a directory on first use; load it now so a broken
    // configuration (Forge's layer, the user's global or project config) fails the start with
    // opencode's own words instead of failing the first session later.
    await checkConfiguration(endpoint, options.cwd, timeoutMs);
  } catch (error) {
    await stop(1_000);
    throw error instanceof OpencodeStartError ? error : new OpencodeStartError(String(error), tail);
  }

  return {
    endpoint,
    pid: pid ?? -1,
    exited,
    marker,
    isRunning: () => exit === undefined,
    outputTail: () => tail,
    stop,
  };
}

export function basicAuthHeader(endpoint: Pick<OpencodeEndpoint, 'username' | 'password'>): string {
  return `Basic ${Buffer.from(`${endpoint.username}:${endpoint.password}`).toString('base64')}`;
}

/** Polls opencode's health endpoint until it answers 200. */
export async function waitForHealth(endpoint: OpencodeEndpoint, exited: Promise<OpencodeExit> | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let gone = false;
  void exited?.then(() => {
    gone = true;
  });
  let lastProblem = 'no answer';
  while (Date.now() < deadline) {
    if (gone) throw new OpencodeStartError('opencode exited before it answered its health check.', '');
    try {
      const response = await fetch(`${endpoint.url}/global/health`, {
        headers: { authorization: basicAuthHeader(endpoint) },
        signal: AbortSignal.timeout(10_000),
      });
      if (response.ok) return;
      lastProblem = `HTTP ${response.status}`;
      if (response.status === 401) throw new OpencodeStartError(`opencode at ${endpoint.url} refused Forge's credentials (HTTP 401).`, '');
    } catch (error) {
      if (error instanceof OpencodeStartError) throw error;
      lastProblem = error instanceof Error ? error.message : String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new OpencodeStartError(`opencode at ${endpoint.url} did not answer its health check within ${Math.round(timeoutMs / 1000)} s (${lastProblem}).`, '');
}

/**
 * Loads the configuration opencode uses for `directory` (the global and project files, Forge's
 * inline layer) and fails with opencode's own words when it is broken.
 */
export async function checkConfiguration(endpoint: OpencodeEndpoint, directory: string, timeoutMs: number): Promise<void> {
  const response = await fetch(`${endpoint.url}/config`, {
    headers: { authorization: basicAuthHeader(endpoint), 'x-opencode-directory': encodeURIComponent(directory) },
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (response.ok) return;
  const body = await response.text();
  throw new OpencodeStartError(`opencode rejected its configuration for ${directory}: ${describeOpencodeError(body)}`, '');
}

/** opencode's error JSON (`{ name, data: { path, issues | message } }`) as one line of text. */
export function describeOpencodeError(body: string): string {
  try {
    const error = JSON.parse(body) as { name?: string; data?: { path?: string; message?: string; issues?: Array<{ path?: unknown[]; message?: string }> } };
    const where = error.data?.path ? ` in ${error.data.path}` : '';
    const issues = (error.data?.issues ?? []).map((i) => `${(i.path ?? []).map(String).join('.') || '(root)'}: ${i.message ?? 'invalid'}`);
    const detail = issues.length ? issues.join('; ') : (error.data?.message ?? body);
    return `${error.name ?? 'error'}${where}: ${detail}`;
  } catch {
    return body.trim() || 'no details';
  }
}

/**
 * Kills a server's process group and every process carrying its marker, synchronously (usable
 * in exit handlers and after a crash).
 */
export function killServerProcessesNow(pid: number, marker: string): void {
  signalProcessGroup(pid, 'SIGKILL');
  killMarkedProcesses(marker);
}

/** SIGKILLs every process whose environment has `FORGE_OPENCODE_INSTANCE=<marker>` (Linux; a no-op elsewhere). */
export function killMarkedProcesses(marker: string): number {
  return signalMarkedProcesses(PROCESS_MARKER_VARIABLE, marker, 'SIGKILL');
}
