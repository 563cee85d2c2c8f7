/**
 * The host side of the file tool guard (file-tool-guard.ts): a small HTTP endpoint on 127.0.0.1
 * that opencode's Forge plugin calls before and after every tool call, and the registry of the
 * worktrees it guards (one entry per loop, registered before the loop's opencode instance runs).
 *
 * The plugin is a file Forge writes outside every worktree (its URL and per-process token are in
 * it, mode 0600) and names in its opencode configuration layer (`plugin`). Before a file tool
 * runs, Forge freezes the loop's sandbox, checks the paths, and answers; the tool's error (the
 * plugin throws) is what the model sees on a refusal. The sandbox thaws when the call ends
 * (`tool.execute.after`, or the tool part's completed/error event for a call that failed).
 * Without Forge (the endpoint gone) the plugin refuses every file tool: it fails closed.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { realPathThroughLinks } from '../fs/real-path';
import { decideFileToolCall, isFileTool, runsInSandbox } from './file-tool-guard';

export interface GuardedWorktree {
  worktreeDir: string;
  allowedDirs: readonly string[];
  /** Freezes the loop's sandbox; resolves to its thaw, or null when it cannot be frozen. Absent: unconfined loop. */
  freeze?: () => Promise<(() => Promise<void>) | null>;
}

export interface FileToolCallRequest {
  directory: string;
  sessionID?: string;
  callID: string;
  tool: string;
  args: Record<string, unknown>;
}

interface Entry extends GuardedWorktree {
  frozen: number;
  thaw: Promise<(() => Promise<void>) | null> | null;
  lock: Promise<void>;
}

/** Safety net: a call whose end never arrives thaws its sandbox after this long. */
const MAX_FROZEN_MS = 120_000;

export class FileToolGuard {
  private readonly entries = new Map<string, Entry>();
  /** Folders whose opencode instance loaded the plugin (an instance outlives a loop's restart in a shared server). */
  private readonly announced = new Set<string>();
  private readonly calls = new Map<string, { release: () => Promise<void>; timer: NodeJS.Timeout }>();

  constructor(private readonly log: (message: string) => void = () => {}) {}

  /** Guards a worktree's file tools; returns the unregister function. */
  register(worktree: GuardedWorktree): () => void {
    const entry: Entry = { ...worktree, frozen: 0, thaw: null, lock: Promise.resolve() };
    const keys = [...new Set([resolve(worktree.worktreeDir), realPathThroughLinks(worktree.worktreeDir)])];
    for (const key of keys) this.entries.set(key, entry);
    return () => {
      for (const key of keys) if (this.entries.get(key) === entry) this.entries.delete(key);
    };
  }

  /** The plugin, loaded by opencode for `directory`, says so (before opencode runs any tool there). */
  hello(directory: string): void {
    if (directory) for (const key of [resolve(directory), realPathThroughLinks(directory)]) this.announced.add(key);
  }

  /**
   * Whether opencode loaded the guard's plugin for this worktree. Until it has, the permission
   * responder refuses file tools (permissions.ts `fileGuardActive`): no guard, no file access.
   */
  active(worktreeDir: string): boolean {
    return this.announced.has(resolve(worktreeDir)) || this.announced.has(realPathThroughLinks(worktreeDir));
  }

  async begin(call: FileToolCallRequest): Promise<{ ok: true } | { ok: false; reason: string }> {
    const args = call.args && typeof call.args === 'object' ? call.args : {};
    if (!isFileTool(call.tool, args)) return { ok: true };
    const entry = this.entries.get(resolve(call.directory)) ?? this.entries.get(realPathThroughLinks(call.directory));
    if (!entry) return { ok: true }; // not a loop's instance (the architect reads the user's repository)
    const release = runsInSandbox(call.tool) ? async () => {} : await this.acquire(entry);
    let decision;
    try {
      decision = decideFileToolCall(call.tool, args, call.directory, { worktreeDir: entry.worktreeDir, allowedDirs: entry.allowedDirs, realPath: realPathThroughLinks });
    } catch (error) {
      decision = { allow: false as const, reason: `Forge could not check the paths of ${call.tool}: ${(error as Error).message}` };
    }
    if (!decision.allow) {
      await release();
      this.log(`[file-guard] refused ${call.tool} in ${entry.worktreeDir}: ${decision.reason}`);
      return { ok: false, reason: decision.reason };
    }
    const key = callKey(call);
    await this.calls.get(key)?.release();
    const timer = setTimeout(() => {
      this.log(`[file-guard] ${call.tool} in ${entry.worktreeDir} did not end within ${MAX_FROZEN_MS / 1000} s: its sandbox is thawed while it still runs`);
      void this.end(call);
    }, MAX_FROZEN_MS);
    timer.unref();
    this.calls.set(key, { release, timer });
    return { ok: true };
  }

  async end(ids: { directory: string; sessionID?: string; callID: string }): Promise<void> {
    const key = callKey(ids);
    const call = this.calls.get(key);
    if (!call) return;
    this.calls.delete(key);
    clearTimeout(call.timer);
    await call.release();
  }

  /** Thaws everything (Forge is closing). */
  async close(): Promise<void> {
    for (const [key, call] of [...this.calls]) {
      this.calls.delete(key);
      clearTimeout(call.timer);
      await call.release();
    }
  }

  /** Freezes the entry's sandbox for one more call (one freeze for concurrent calls); returns that call's release. */
  private async acquire(entry: Entry): Promise<() => Promise<void>> {
    if (!entry.freeze) return async () => {};
    const run = entry.lock.then(async () => {
      if (entry.frozen === 0) {
        entry.thaw = entry.freeze!().then((thaw) => {
          if (!thaw) this.log(`[file-guard] the sandbox of ${entry.worktreeDir} cannot be frozen: its file tool calls are checked without a freeze`);
          return thaw;
        });
      }
      try {
        await entry.thaw;
      } catch (error) {
        if (entry.frozen === 0) entry.thaw = null;
        throw error;
      }
      entry.frozen++;
    });
    entry.lock = run.catch(() => undefined);
    await run;
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      const next = entry.lock.then(async () => {
        entry.frozen--;
        if (entry.frozen === 0) {
          const thaw = await entry.thaw?.catch(() => null);
          entry.thaw = null;
          await thaw?.();
        }
      });
      entry.lock = next.catch(() => undefined);
      await next;
    };
  }
}

/** Call ids come from the model: unique only within a session. */
function callKey(ids: { directory: string; sessionID?: string; callID: string }): string {
  return `${resolve(ids.directory)}\0${ids.sessionID ?? ''}\0${ids.callID}`;
}

export interface FileGuardServer {
  guard: FileToolGuard;
  /** `file://` URL of the plugin to list in opencode's `plugin` configuration. */
  pluginUrl: string;
  close(): Promise<void>;
}

/** The opencode plugin: plain JavaScript with no imports (nothing to install offline). */
export function renderFileGuardPlugin(url: string, token: string): string {
  return `// Generated by Forge: checks opencode's file tools before they run (Forge's file tool guard).
const URL_BASE = ${JSON.stringify(url)};
const AUTH = ${JSON.stringify(`Bearer ${token}`)};
async function post(path, body) {
  const res = await fetch(URL_BASE + path, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error('HTTP ' + res.status);
  return res.json();
}
export const ForgeFileGuard = async ({ directory }) => {
  await post('/hello', { directory }).catch(() => undefined);
  return {
  'tool.execute.before': async (input, output) => {
    let answer;
    try {
      answer = await post('/begin', { directory, sessionID: input.sessionID, callID: input.callID, tool: input.tool, args: output.args ?? {} });
    } catch (error) {
      throw new Error('Forge refused ' + input.tool + ": Forge's file tool guard is not reachable (" + (error && error.message) + ').');
    }
    if (!answer.ok) throw new Error(answer.reason);
  },
  'tool.execute.after': async (input) => {
    await post('/end', { directory, sessionID: input.sessionID, callID: input.callID }).catch(() => undefined);
  },
  event: async ({ event }) => {
    const part = event && event.type === 'message.part.updated' ? event.properties && event.properties.part : undefined;
    if (part && part.type === 'tool' && part.state && (part.state.status === 'completed' || part.state.status === 'error')) {
      await post('/end', { directory, sessionID: part.sessionID, callID: part.callID }).catch(() => undefined);
    }
  },
  };
};
`;
}

/** Starts the endpoint and writes its plugin into `pluginDir` (Forge's data folder, never a worktree). */
export async function startFileGuardServer(options: { pluginDir: string; log?: (message: string) => void }): Promise<FileGuardServer> {
  const guard = new FileToolGuard(options.log);
  const token = randomBytes(32).toString('base64url');
  const expected = Buffer.from(`Bearer ${token}`);
  const server: Server = createServer((req, res) => {
    void (async () => {
      const auth = Buffer.from(req.headers.authorization ?? '');
      if (req.method !== 'POST' || auth.length !== expected.length || !timingSafeEqual(auth, expected)) {
        res.writeHead(401).end();
        return;
      }
      try {
        const body = JSON.parse(await readBody(req)) as Record<string, unknown>;
        let answer: unknown = { ok: true };
        if (req.url === '/begin') {
          answer = await guard.begin({
            directory: String(body.directory ?? ''),
            callID: String(body.callID ?? ''),
            tool: String(body.tool ?? ''),
            args: (body.args ?? {}) as Record<string, unknown>,
            ...(typeof body.sessionID === 'string' ? { sessionID: body.sessionID } : {}),
          });
        } else if (req.url === '/hello') {
          guard.hello(String(body.directory ?? ''));
        } else if (req.url === '/end') {
          // The thaw need not delay opencode: the next freeze of the worktree waits for it (acquire's lock).
          const ids = { directory: String(body.directory ?? ''), callID: String(body.callID ?? '') };
          void guard.end(typeof body.sessionID === 'string' ? { ...ids, sessionID: body.sessionID } : ids).catch(() => undefined);
        } else {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      } catch (error) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, reason: `Forge's file tool guard: ${(error as Error).message}` }));
      }
    })();
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  mkdirSync(options.pluginDir, { recursive: true, mode: 0o700 });
  const pluginPath = join(options.pluginDir, `forge-file-guard-${process.pid}-${randomBytes(4).toString('hex')}.mjs`);
  writeFileSync(pluginPath, renderFileGuardPlugin(`http://127.0.0.1:${port}`, token), { mode: 0o600 });
  return {
    guard,
    pluginUrl: pathToFileURL(pluginPath).href,
    async close() {
      await guard.close();
      const closed = new Promise<void>((ok) => server.close(() => ok()));
      server.closeAllConnections?.();
      await closed;
      rmSync(pluginPath, { force: true });
    },
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => ok(Buffer.concat(chunks).toString('utf8')));
    req.on('error', fail);
  });
}
