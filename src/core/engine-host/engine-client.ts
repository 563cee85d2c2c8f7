/**
 * The client side of the engine endpoint: finds the data folder's live engine (its info file
 * names a live process, its socket answers `hello` with the same supervisor id) and asks it to
 * start, restart or cancel a loop. The secret is read from the engine's 0600 file, never from
 * argv or the environment.
 */
import { connect, type Socket } from 'node:net';
import type { LoopRef, RestartLoopOptions, StartLoopRequest } from '../loop/runtime-types';
import { endpointPaths, readLiveEngineInfo, readSecret, takeClaim } from './endpoint-files';
import { encodeMessage, ENGINE_PROTOCOL_VERSION, LineDecoder, parseReply, type EngineInfo, type EngineReply, type EngineRequest } from './protocol';

export interface EngineConnection {
  readonly engine: EngineInfo;
  /** Sends a start or restart; resolves with the engine's first answer to it. */
  request(message: StartOrRestart): Promise<Extract<EngineReply, { type: 'accepted' | 'refused' | 'error' }>>;
  cancel(ref: LoopRef): void;
  /** Cancels a loop this engine supervises and waits for its answer (null: no answer within a minute, or the engine went away). */
  cancelAndWait(ref: LoopRef): Promise<Extract<EngineReply, { type: 'cancelled' | 'refused' | 'error' }> | null>;
  /** Sends the user's words to a loop the engine drives; resolves with its answer (null: the engine went away). */
  tell(ref: LoopRef, text: string): Promise<Extract<EngineReply, { type: 'told' | 'refused' | 'error' }> | null>;
  /** Every later reply (events, live feed, cancelled) in order. */
  onReply(listener: (reply: EngineReply) => void): void;
  /** Called once when the connection ends (the engine closed it or its process died). */
  onClose(listener: () => void): void;
  close(): void;
}

export type StartOrRestart =
  | { type: 'start'; request: StartLoopRequest; follow: boolean; compat: string }
  | { type: 'restart'; ref: LoopRef; options: RestartLoopOptions; follow: boolean; compat: string };

/**
 * The data folder's engine, or this process's claim to become it. Runs started at the same
 * moment would otherwise each find no engine and each supervise their own loop: the first takes
 * the claim (and listens once its own loop runs), the others wait for it to listen — while its
 * claim holder lives, at most `waitMs` — and hand their loops over to it.
 */
export async function connectOrClaimEngine(dataDir: string, waitMs = 60_000): Promise<{ conn: EngineConnection } | { claimed: boolean }> {
  const paths = endpointPaths(dataDir);
  const deadline = Date.now() + waitMs;
  for (;;) {
    const conn = await connectToEngine(dataDir);
    if (conn) return { conn };
    if (takeClaim(paths)) return { claimed: true };
    if (Date.now() >= deadline) return { claimed: false };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The data folder's engine, connected and greeted; null when none answers (no info file, a dead
 * pid, a stale socket, another engine's socket, a refused greeting).
 */
/**
 * One question to the data folder's engine on a connection of its own, closed afterwards; null
 * when no live engine (other than this process) answers the connection.
 */
export async function askEngine<T>(dataDir: string, ask: (conn: EngineConnection) => Promise<T>): Promise<T | null> {
  const conn = await connectToEngine(dataDir);
  if (!conn) return null;
  try {
    return await ask(conn);
  } finally {
    conn.close();
  }
}

export async function connectToEngine(dataDir: string, timeoutMs = 10_000): Promise<EngineConnection | null> {
  const paths = endpointPaths(dataDir);
  const info = readLiveEngineInfo(paths);
  if (!info || info.pid === process.pid) return null;
  const secret = readSecret(paths);
  if (!secret) return null;
  let socket: Socket;
  try {
    socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect(paths.socket);
      s.once('connect', () => {
        s.off('error', reject);
        resolve(s);
      });
      s.once('error', reject);
    });
  } catch {
    return null; // ENOENT, ECONNREFUSED: a stale socket or an engine that just left
  }
  socket.setEncoding('utf8');
  const decoder = new LineDecoder();
  const replies: EngineReply[] = [];
  let waiter: ((reply: EngineReply | null) => void) | null = null;
  let listener: ((reply: EngineReply) => void) | null = null;
  let closeListener: (() => void) | null = null;
  let closed = false;
  const deliver = (reply: EngineReply | null) => {
    if (waiter) {
      const w = waiter;
      waiter = null;
      w(reply);
    } else if (reply && listener) listener(reply);
    else if (reply) replies.push(reply);
  };
  socket.on('data', (chunk: string) => {
    const { lines, overflow } = decoder.push(chunk);
    if (overflow) socket.destroy();
    for (const line of lines) {
      const parsed = parseReply(line);
      // A line this client does not understand is dropped, not acted on.
      if (parsed.ok) deliver(parsed.reply);
    }
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    closed = true;
    deliver(null);
    closeListener?.();
  });
  const next = (ms: number) =>
    new Promise<EngineReply | null>((resolve) => {
      const queued = replies.shift();
      if (queued) return resolve(queued);
      if (closed) return resolve(null);
      const timer = setTimeout(() => {
        waiter = null;
        resolve(null);
      }, ms);
      waiter = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
    });
  /** The next reply of one of `types` (events and live lines in between are passed over); null when none comes within `ms` of the last reply or the socket closed. */
  const replyOf = async <T extends EngineReply['type']>(types: readonly T[], ms: number): Promise<Extract<EngineReply, { type: T }> | null> => {
    for (;;) {
      const reply = await next(ms);
      if (!reply) return null;
      if ((types as readonly string[]).includes(reply.type)) return reply as Extract<EngineReply, { type: T }>;
    }
  };
  const send = (m: EngineRequest) => {
    if (!socket.destroyed) socket.write(encodeMessage(m));
  };

  send({ type: 'hello', secret, version: ENGINE_PROTOCOL_VERSION });
  const hello = await next(timeoutMs);
  if (!hello || hello.type !== 'hello' || hello.engine.supervisorId !== info.supervisorId) {
    socket.destroy();
    return null;
  }
  return {
    engine: hello.engine,
    async request(message) {
      send({ ...message, secret, clientPid: process.pid } as EngineRequest);
      // No time limit: a start may build a sandbox or a worktree first.
      const reply = await replyOf(['accepted', 'refused', 'error'], 2 ** 31 - 1);
      // The engine went away in the middle: the loop may have started there, so the asker must
      // not start it again on its own (it would be a second loop); it says so instead.
      return reply ?? { type: 'error', code: 'engine_gone', message: `The Forge engine in process ${info.pid} went away while starting the loop. "forge status" shows whether it started; "forge restart NAME --force" takes a started one over.` };
    },
    cancel(ref) {
      send({ type: 'cancel', secret, ref });
    },
    cancelAndWait(ref) {
      send({ type: 'cancel', secret, ref });
      return replyOf(['cancelled', 'refused', 'error'], 60_000);
    },
    tell(ref, text) {
      send({ type: 'tell', secret, ref, text });
      return replyOf(['told', 'refused', 'error'], 60_000);
    },
    onReply(l) {
      listener = l;
      for (const r of replies.splice(0)) l(r);
    },
    onClose(l) {
      closeListener = l;
      if (closed) l();
    },
    close() {
      socket.destroy();
    },
  };
}
