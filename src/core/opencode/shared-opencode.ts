/**
 * One opencode server for many loops.
 *
 * opencode serves every directory it is asked about as an instance of its own (the
 * `x-opencode-directory` of each request): sessions, events, configuration and MCP clients are
 * per instance. So one `opencode serve` can serve every loop of a Forge process, each loop in
 * its own worktree instance. What used to need a server per loop, and how it is kept here:
 *
 * - Forge's tools. An MCP server is told nothing about its caller, so each loop's tool scope
 *   has its own URL. That URL is not put in the server's configuration (which is per process)
 *   but added to the loop's *instance* at run time (`POST /mcp` with the worktree directory),
 *   and added again after a restart of the server or when the instance lost it. The tool
 *   server's bearer secret thus never enters the server's environment at all.
 * - The agent's shell. The server's `shell` is a router (shell-router.ts) that runs each
 *   command through the shell of the loop whose worktree it runs in. Servers are keyed by
 *   confinement, so sandboxed and unconfined loops never share a server (or a router).
 * - Models. Each prompt names its model, so the agents' configuration carries none and loops
 *   on different models share a server; anything else that differs (the environment, the
 *   inline configuration, the binary) gives a server of its own, keyed by all of it.
 * - Crashes. The server is supervised as before (server-supervisor.ts): a crash restarts it
 *   once for all its loops, and each loop's view of it re-registers the loop's tools before the
 *   loop's next request, then goes on in a fresh session as it always did.
 * - Stopping. A loop's end takes its route and its instance off the server and kills the
 *   processes its agent left (they carry the loop's own marker); the server stops when its last
 *   loop has left and no other joined within `lingerMs`.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fingerprint } from '../process/fingerprint';
import { signalMarkedProcesses } from '../process/marked-processes';
import { realPathThroughLinks } from '../fs/real-path';
import { LOOP_PROCESS_MARKER_VARIABLE, ShellRouter } from '../sandbox/shell-router';
import type { OpencodeRemoteMcpEntry } from './forge-tool-server';
import { FORGE_MCP_SERVER_NAME } from './forge-tools';
import { addRemoteMcpServer, disposeOpencodeInstance } from './sdk-agent-client';
import { checkConfiguration, deepMerge, type OpencodeEndpoint } from './server-process';
import {
  startSupervisedOpencode,
  type OpencodeServerHandle,
  type OpencodeServerListener,
  type RestartPolicy,
  type SupervisedServerOptions,
} from './server-supervisor';

/** How a loop's agent commands run: in its sandbox, on the host through its agent shell, or as opencode runs them (no sandbox port at all). */
export type SharedServerConfinement = 'sandboxed' | 'host' | 'plain';

export interface SharedServerRequest {
  binaryPath: string;
  confinement: SharedServerConfinement;
  /** The environment shared by the loops (no loop's shell or PATH in it). */
  baseEnv: NodeJS.ProcessEnv;
  extraEnv?: Record<string, string>;
  /** Forge's configuration layer without any loop's MCP entry, shell or models. */
  forgeConfig: Record<string, unknown>;
  startTimeoutMs?: number;
  restart?: Partial<RestartPolicy>;
  onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
}

export interface SharedServerJoin {
  loopName: string;
  worktreeDir: string;
  mcpEntry: OpencodeRemoteMcpEntry;
  /** The loop's own shell and ripgrep shim; required unless the confinement is 'plain'. */
  shell?: { shellPath: string; ripgrepPath?: string };
  /** Runs before every start of the loop's instance (its first, and after each server restart), before opencode reads the worktree. */
  beforeInstance?: () => Promise<void>;
  log?: (message: string) => void;
}

export interface SharedServerMembership {
  /** The loop's view of the server: waiting for it also makes sure the loop's tools are registered. */
  server: OpencodeServerHandle;
  /** FORGE_LOOP_INSTANCE of every process the loop's agent starts through the router. */
  loopMarker: string;
  /** The server's main process (for status and tests; never to be killed for one loop). */
  serverPid(): number | undefined;
  leave(): Promise<void>;
}

export interface SharedServerInfo {
  id: string;
  confinement: SharedServerConfinement;
  pid: number | undefined;
  generation: number;
  loops: string[];
}

export interface SharedOpencodePool {
  join(request: SharedServerRequest, loop: SharedServerJoin): Promise<SharedServerMembership>;
  servers(): SharedServerInfo[];
  dispose(): Promise<void>;
}

export interface SharedOpencodePoolOptions {
  /** Forge-owned folder for the routers and the servers' working folders; never inside a worktree. */
  root: string;
  /** How long a server with no loop left waits for another before it stops (default 10 s). */
  lingerMs?: number;
  log?: (message: string) => void;
  /** Replaces the supervised start (tests of the pool itself). */
  startServer?: (options: SupervisedServerOptions) => Promise<OpencodeServerHandle>;
}

interface Member {
  loopName: string;
  worktreeDir: string;
  mcpEntry: OpencodeRemoteMcpEntry;
  beforeInstance?: () => Promise<void>;
  /** Generation whose registration is done or under way. */
  registered?: { generation: number; done: Promise<void> };
  /** How long the last registration took, for the debug log. */
  registerTimings?: string;
}

interface PooledServer {
  id: string;
  confinement: SharedServerConfinement;
  dir: string;
  router: ShellRouter | undefined;
  handle: OpencodeServerHandle;
  members: Map<string, Member>;
  lingerTimer?: NodeJS.Timeout;
  /** Stopping for want of loops: a join that finds it so starts another. */
  retired?: boolean;
}

/** What makes two loops' servers interchangeable: everything the server process is started with. */
export function sharedServerKey(request: Pick<SharedServerRequest, 'binaryPath' | 'confinement' | 'baseEnv' | 'extraEnv' | 'forgeConfig'>): string {
  return fingerprint({ binaryPath: request.binaryPath, confinement: request.confinement, env: { ...request.baseEnv, ...(request.extraEnv ?? {}) }, config: request.forgeConfig });
}

export function createSharedOpencodePool(options: SharedOpencodePoolOptions): SharedOpencodePool {
  const log = options.log ?? (() => {});
  const lingerMs = options.lingerMs ?? 10_000;
  const startServer = options.startServer ?? startSupervisedOpencode;
  const servers = new Map<string, Promise<PooledServer>>();
  /** The servers that are up (or restarting), by key. */
  const settled = new Map<string, PooledServer>();
  let disposed = false;

  async function startPooled(key: string, request: SharedServerRequest): Promise<PooledServer> {
    const id = randomBytes(6).toString('hex');
    const dir = join(options.root, id);
    const cwd = join(dir, 'home');
    await mkdir(cwd, { recursive: true });
    let router: ShellRouter | undefined;
    let env: Record<string, string> = { ...(request.extraEnv ?? {}) };
    let forgeConfig = request.forgeConfig;
    if (request.confinement !== 'plain') {
      router = new ShellRouter(join(dir, 'router'), request.confinement === 'sandboxed');
      await router.init();
      env = { ...env, SHELL: router.shellPath };
      if (request.confinement === 'sandboxed') {
        const basePath = request.extraEnv?.PATH ?? request.baseEnv.PATH ?? '/usr/bin:/bin';
        env.PATH = `${router.binDir}:${basePath}`;
      }
      forgeConfig = deepMerge(forgeConfig, { shell: router.shellPath });
    }
    try {
      // Forge's layer goes over the inline configuration baseEnv carries (buildOpencodeEnvironment).
      const handle = await startServer({
        binaryPath: request.binaryPath,
        cwd,
        baseEnv: request.baseEnv,
        extraEnv: env,
        forgeConfig,
        ...(request.startTimeoutMs !== undefined ? { startTimeoutMs: request.startTimeoutMs } : {}),
        ...(request.restart ? { restart: request.restart } : {}),
        ...(request.onOutput ? { onOutput: request.onOutput } : {}),
      });
      log(`shared opencode server ${id} (${request.confinement}) started, pid ${handle.pid() ?? '?'}`);
      const pooled: PooledServer = { id, confinement: request.confinement, dir, router, handle, members: new Map() };
      settled.set(key, pooled);
      return pooled;
    } catch (error) {
      servers.delete(key);
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    }
  }

  /** Makes sure the loop's instance exists with a sound configuration and Forge's tools for this generation of the server. */
  async function register(member: Member, endpoint: OpencodeEndpoint, generation: number): Promise<void> {
    if (member.registered?.generation === generation) return member.registered.done;
    const done = (async () => {
      await member.beforeInstance?.();
      const t0 = performance.now();
      await checkConfiguration(endpoint, member.worktreeDir, 60_000);
      const t1 = performance.now();
      await addRemoteMcpServer(endpoint, member.worktreeDir, FORGE_MCP_SERVER_NAME, member.mcpEntry);
      member.registerTimings = `configuration ${Math.round(t1 - t0)} ms, Forge's tools ${Math.round(performance.now() - t1)} ms`;
    })();
    member.registered = { generation, done };
    done.catch(() => {
      if (member.registered?.done === done) member.registered = undefined;
    });
    return done;
  }

  function viewFor(pooled: PooledServer, member: Member): OpencodeServerHandle {
    const base = pooled.handle;
    return {
      generation: () => base.generation(),
      endpoint: () => base.endpoint(),
      async waitForEndpoint(timeoutMs?: number) {
        const endpoint = await base.waitForEndpoint(timeoutMs);
        await register(member, endpoint, base.generation());
        return endpoint;
      },
      // The server is not the loop's: a takeover or a cancel of this loop must never kill it.
      pid: () => undefined,
      marker: () => undefined,
      onEvent(listener: OpencodeServerListener) {
        return base.onEvent((event) => listener(event.type === 'started' ? { ...event, pid: undefined, marker: undefined } : event));
      },
      // Leaving the server is the membership's business.
      stop: async () => undefined,
    };
  }

  async function joinServer(request: SharedServerRequest, loop: SharedServerJoin): Promise<SharedServerMembership> {
    if (disposed) throw new Error('Forge is shutting down.');
    if (request.confinement !== 'plain' && !loop.shell) throw new Error(`Loop ${loop.loopName} has no shell of its own to route to.`);
    const key = sharedServerKey(request);
    let pooled: PooledServer;
    do {
      let pending = servers.get(key);
      if (!pending) {
        pending = startPooled(key, request);
        servers.set(key, pending);
      }
      pooled = await pending;
    } while (pooled.retired);
    if (pooled.lingerTimer) {
      clearTimeout(pooled.lingerTimer);
      pooled.lingerTimer = undefined;
    }
    const memberId = randomBytes(8).toString('hex');
    const loopMarker = randomBytes(12).toString('hex');
    const member: Member = { loopName: loop.loopName, worktreeDir: loop.worktreeDir, mcpEntry: loop.mcpEntry, ...(loop.beforeInstance ? { beforeInstance: loop.beforeInstance } : {}) };
    pooled.members.set(memberId, member);
    const leave = async () => {
      if (!pooled.members.delete(memberId)) return;
      await pooled.router?.remove(memberId).catch((e) => log(`shared opencode ${pooled.id}: removing the route of ${loop.loopName}: ${String(e)}`));
      // What the loop's agent left running (an unconfined loop's background processes).
      signalMarkedProcesses(LOOP_PROCESS_MARKER_VARIABLE, loopMarker, 'SIGKILL');
      const endpoint = pooled.handle.endpoint();
      if (endpoint) {
        await disposeOpencodeInstance(endpoint, loop.worktreeDir).catch((e) => log(`shared opencode ${pooled.id}: releasing ${loop.loopName}'s instance: ${String(e)}`));
      }
      if (pooled.members.size === 0 && !pooled.lingerTimer) {
        pooled.lingerTimer = setTimeout(() => {
          pooled.lingerTimer = undefined;
          if (pooled.members.size === 0) void retire(key, pooled);
        }, lingerMs);
        pooled.lingerTimer.unref?.();
      }
    };
    const t0 = performance.now();
    let routed = t0;
    try {
      if (pooled.router && loop.shell) {
        const directories = [loop.worktreeDir, realPathThroughLinks(loop.worktreeDir)];
        await pooled.router.add(memberId, { directories, shellPath: loop.shell.shellPath, ...(loop.shell.ripgrepPath ? { ripgrepPath: loop.shell.ripgrepPath } : {}), loopMarker });
      }
      routed = performance.now();
      const endpoint = await pooled.handle.waitForEndpoint();
      await register(member, endpoint, pooled.handle.generation());
    } catch (error) {
      await leave();
      throw error;
    }
    loop.log?.(`joined shared opencode server ${pooled.id} (pid ${pooled.handle.pid() ?? '?'}, ${pooled.members.size} loop(s)) in ${Math.round(performance.now() - t0)} ms: route ${Math.round(routed - t0)} ms, ${member.registerTimings ?? 'registered before'}`);
    return { server: viewFor(pooled, member), loopMarker, serverPid: () => pooled.handle.pid(), leave };
  }

  async function retire(key: string, pooled: PooledServer): Promise<void> {
    if (settled.get(key) !== pooled) return;
    pooled.retired = true;
    servers.delete(key);
    settled.delete(key);
    await pooled.handle.stop();
    await rm(pooled.dir, { recursive: true, force: true }).catch(() => undefined);
    log(`shared opencode server ${pooled.id} stopped (no loop left)`);
  }

  return {
    join: joinServer,
    servers() {
      const out: SharedServerInfo[] = [];
      for (const pooled of settled.values()) {
        out.push({ id: pooled.id, confinement: pooled.confinement, pid: pooled.handle.pid(), generation: pooled.handle.generation(), loops: [...pooled.members.values()].map((m) => m.loopName) });
      }
      return out;
    },
    async dispose() {
      disposed = true;
      const all = await Promise.allSettled([...servers.values()]);
      servers.clear();
      settled.clear();
      await Promise.all(
        all.map(async (r) => {
          if (r.status !== 'fulfilled') return;
          if (r.value.lingerTimer) clearTimeout(r.value.lingerTimer);
          await r.value.handle.stop();
          await rm(r.value.dir, { recursive: true, force: true }).catch(() => undefined);
        }),
      );
    },
  };
}
