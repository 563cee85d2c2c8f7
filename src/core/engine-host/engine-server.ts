/**
 * The engine endpoint: a process that supervises loops (a `forge run`, a VS Code window) listens
 * on its data folder's socket, so later `forge run`s hand their loops to it instead of starting a
 * process, a server and a writer of their own. The engine starts a handed-over loop through its
 * own runtime (it takes the lease as any supervisor does: SPEC §2) and streams that loop's events
 * to the client that asked; the client writes nothing of the loop.
 *
 * Host-neutral: the CLI and the extension create it with their runtime and live feed.
 */
import { chmodSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { LiveFeed } from '../live/live-feed';
import { LoopRuntimeError, type LoopRef, type LoopRuntime, type LoopRuntimeEvent } from '../loop/runtime-types';
import type { EngineLog } from '../loop/loop-supervisor';
import { endpointPaths, publishEndpoint, takeClaim, withdrawEndpoint } from './endpoint-files';
import {
  encodeMessage,
  ENGINE_PROTOCOL_VERSION,
  LineDecoder,
  parseRequest,
  refKey,
  secretMatches,
  type EngineInfo,
  type EngineKind,
  type EngineReply,
  type EngineRequest,
} from './protocol';

export interface EngineEndpointDeps {
  dataDir: string;
  kind: EngineKind;
  /** The runtime's lease holder id (`<pid>:<uuid>`). */
  supervisorId: string;
  runtime: LoopRuntime;
  live?: Pick<LiveFeed, 'subscribe'>;
  /**
   * compatibilityKey of this process: a client with another one supervises its loop itself. A
   * function where the settings can change while the process is the engine (a VS Code window):
   * read at each request, so a loop is never accepted under settings that were.
   */
  compat: string | (() => string);
  log: EngineLog;
  /** Told when another process handed a loop over (the host may say so). */
  onHandedOver?: (ref: LoopRef, clientPid: number) => void;
}

export interface EngineEndpoint {
  readonly info: EngineInfo;
  /** Loops handed over by other processes that this engine still supervises (and starts under way). */
  handedOver(): number;
  /** Resolves once no handed-over loop runs; from then on new hand-overs are refused (closing). */
  stopWhenIdle(): Promise<void>;
  /** Refuses new hand-overs from now on (clients then supervise their loops themselves). */
  stopAccepting(): void;
  /** Stops listening and removes the socket, info and secret files. */
  close(): Promise<void>;
}

/**
 * Makes this process the data folder's engine. Null when another live process holds the data
 * folder's claim (it is the engine; this process supervises only what it started itself).
 */
export async function becomeEngine(deps: EngineEndpointDeps): Promise<EngineEndpoint | null> {
  const paths = endpointPaths(deps.dataDir);
  if (!takeClaim(paths)) return null;
  const info: EngineInfo = { pid: process.pid, supervisorId: deps.supervisorId, kind: deps.kind, started: Date.now(), version: ENGINE_PROTOCOL_VERSION };
  let secret: string;
  const server: Server = createServer((socket) => serveConnection(socket));
  try {
    secret = publishEndpoint(paths, info);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(paths.socket, () => {
        server.off('error', reject);
        resolve();
      });
    });
    chmodSync(paths.socket, 0o600);
  } catch (error) {
    withdrawEndpoint(paths, info);
    throw error;
  }
  server.on('error', (error) => deps.log.warn(`[engine] ${String(error)}`));
  // A listening socket must not keep a process alive on its own: the loops do that.
  server.unref();

  const handed = new Set<string>();
  let starting = 0;
  let closing = false;
  let idleWaiters: Array<() => void> = [];
  const sockets = new Set<Socket>();

  const checkIdle = () => {
    if (handed.size > 0 || starting > 0 || idleWaiters.length === 0) return;
    closing = true;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w();
  };
  const offEnds = deps.runtime.subscribe((e) => {
    if ((e.type === 'loop.ended' || e.type === 'loop.supervision_lost') && handed.delete(refKey(e.loop))) checkIdle();
  });

  function serveConnection(socket: Socket): void {
    sockets.add(socket);
    socket.setEncoding('utf8');
    const decoder = new LineDecoder();
    const watched = new Set<string>();
    let follow = false;
    /** Events of a start under way: its loop's name is known only when the start returns. */
    let pending: LoopRuntimeEvent[] | null = null;
    const send = (reply: EngineReply) => {
      if (!socket.destroyed) socket.write(encodeMessage(reply));
    };
    const forward = (e: LoopRuntimeEvent) => {
      if (watched.has(refKey(e.loop))) send({ type: 'event', event: e });
    };
    const offRuntime = deps.runtime.subscribe((e) => {
      if (pending) pending.push(e);
      else forward(e);
    });
    const offLive = deps.live
      ? deps.live.subscribe((e) => {
          if (follow && watched.has(refKey(e.loop))) send({ type: 'live', event: e });
        })
      : () => true;
    const cleanup = () => {
      sockets.delete(socket);
      offRuntime();
      offLive();
    };
    socket.on('close', cleanup);
    socket.on('error', () => socket.destroy());
    // Requests of one connection are served one after the other, in order.
    let queue = Promise.resolve();
    socket.on('data', (chunk: string) => {
      const { lines, overflow } = decoder.push(chunk);
      if (overflow) {
        send({ type: 'refused', code: 'bad_message', message: 'message too long' });
        socket.end();
        return;
      }
      for (const line of lines) queue = queue.then(() => handle(line)).catch((error) => deps.log.warn(`[engine] ${String(error)}`));
    });

    async function handle(line: string): Promise<void> {
      const parsed = parseRequest(line);
      if (!parsed.ok) {
        send({ type: 'refused', code: 'bad_message', message: `not a request of the Forge engine protocol: ${parsed.message}` });
        socket.end();
        return;
      }
      const request = parsed.request;
      if (!secretMatches(request.secret, secret)) {
        // Nothing is said about why beyond this, and the connection ends.
        send({ type: 'refused', code: 'unauthorized', message: 'wrong secret: this engine takes loops only from processes of its user that read its secret file' });
        socket.end();
        return;
      }
      if (request.type === 'hello') {
        if (request.version !== ENGINE_PROTOCOL_VERSION) send({ type: 'refused', code: 'version', message: `this engine speaks protocol ${ENGINE_PROTOCOL_VERSION}, not ${request.version}` });
        else send({ type: 'hello', engine: info });
        return;
      }
      if (request.type === 'cancel') {
        if (!deps.runtime.isSupervising(request.ref)) {
          send({ type: 'error', code: 'not_running', message: `This engine (process ${info.pid}) does not supervise loop "${request.ref.name}".` });
          return;
        }
        await deps.runtime.cancel(request.ref).then(
          () => send({ type: 'cancelled' }),
          (error) => send(errorReply(error)),
        );
        return;
      }
      if (request.type === 'tell') {
        if (!deps.runtime.isSupervising(request.ref)) {
          send({ type: 'error', code: 'not_running', message: `This engine (process ${info.pid}) does not supervise loop "${request.ref.name}".` });
          return;
        }
        await deps.runtime.tell(request.ref, request.text).then(
          (told) => send({ type: 'told', ...told }),
          (error) => send(errorReply(error)),
        );
        return;
      }
      await startOrRestart(request);
    }

    async function startOrRestart(request: Extract<EngineRequest, { type: 'start' | 'restart' }>): Promise<void> {
      if (closing) {
        send({ type: 'refused', code: 'closing', message: `the engine in process ${info.pid} is shutting down` });
        return;
      }
      if (request.compat !== (typeof deps.compat === 'function' ? deps.compat() : deps.compat)) {
        send({ type: 'refused', code: 'incompatible', message: `the engine in process ${info.pid} runs with other Forge settings or another environment (models, credentials, opencode configuration)` });
        return;
      }
      follow = request.follow === true;
      starting++;
      pending = [];
      let ref: LoopRef | undefined;
      let notices: string[] = [];
      try {
        if (request.type === 'start') {
          const started = await deps.runtime.start(request.request);
          ref = { projectId: started.projectId, name: started.name };
          // What the process that asked must tell its user (an UNCONFINED loop above all).
          notices = started.notices;
        } else {
          await deps.runtime.restart(request.ref, request.options);
          ref = request.ref;
        }
        handed.add(refKey(ref));
        watched.add(refKey(ref));
        deps.onHandedOver?.(ref, request.clientPid);
        send({ type: 'accepted', ref, ...(notices.length > 0 ? { notices } : {}) });
      } catch (error) {
        send(errorReply(error));
      } finally {
        starting--;
        let buffered = pending ?? [];
        pending = null;
        // A forced restart of a loop this engine drove ends that supervision first: that end is
        // not the restarted loop's, and the client must not take it for one.
        if (request.type === 'restart') buffered = buffered.filter((e) => e.type !== 'loop.supervision_lost');
        for (const e of buffered) forward(e);
        checkIdle();
      }
    }
  }

  return {
    info,
    handedOver: () => handed.size + starting,
    stopWhenIdle() {
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        checkIdle();
      });
    },
    stopAccepting() {
      closing = true;
    },
    async close() {
      closing = true;
      offEnds();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Let what was written reach the clients (the ends of their loops), then hang up.
        for (const s of sockets) s.end(() => s.destroy());
      });
      withdrawEndpoint(paths, info);
    },
  };
}

function errorReply(error: unknown): EngineReply {
  if (error instanceof LoopRuntimeError) return { type: 'error', code: error.code, message: error.message };
  return { type: 'error', code: 'internal', message: error instanceof Error ? error.message : String(error) };
}
