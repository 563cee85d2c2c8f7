/**
 * The engine endpoint's wire protocol: newline-delimited JSON over the data folder's Unix socket.
 * Pure: framing, validation (zod) and the shapes of every message, no I/O. Whatever arrives on
 * the socket is untrusted input: it is parsed here and refused with a reason when malformed,
 * before the engine acts on it.
 */
import { timingSafeEqual } from 'node:crypto';
import * as z from '../config/zod';
import { MAX_USER_MESSAGE_CHARS, type LoopRef, type LoopRuntimeEvent, type RestartLoopOptions, type StartLoopRequest, type UserMessageDelivery } from '../loop/runtime-types';
import type { LiveFeedEvent } from '../live/live-feed';
import { fingerprint } from '../process/fingerprint';

/** Bumped when a message changes shape: an engine of another version is not handed loops. */
export const ENGINE_PROTOCOL_VERSION = 1;

/** One message may be long (a plan's text), never unbounded: a line past this is refused. */
export const MAX_LINE_CHARS = 4 * 1024 * 1024;

export type EngineKind = 'cli' | 'vscode';

/** What an engine says about itself (in its info file and in its `hello`). */
export interface EngineInfo {
  pid: number;
  supervisorId: string;
  kind: EngineKind;
  /** ms since the epoch. */
  started: number;
  version: number;
}

const ref = z.strictObject({ projectId: z.string().check(z.minLength(1)), name: z.string().check(z.minLength(1)) });
const strings = z.optional(z.readonly(z.array(z.string())));
const budget = z.optional(
  z.strictObject({
    money: z.optional(z.nullable(z.number())),
    tokens: z.optional(z.nullable(z.number())),
    auditorShare: z.optional(z.nullable(z.number())),
  }),
);

const startRequest = z.strictObject({
  kind: z.enum(['plan', 'goal']),
  repoPath: z.string().check(z.minLength(1)),
  planText: z.optional(z.string()),
  planSource: z.optional(z.string()),
  goal: z.optional(z.string()),
  checks: z.optional(z.strictObject({ check: strings, exists: strings, contains: strings, matches: strings })),
  name: z.optional(z.string()),
  maxIterations: z.optional(z.int()),
  model: z.optional(z.string()),
  auditorModel: z.optional(z.string()),
  variant: z.optional(z.string()),
  sandbox: z.optional(z.boolean()),
  merge: z.optional(z.enum(['never', 'fast-forward', 'merge'])),
  baseCommit: z.optional(z.string()),
  budget,
});

const restartOptions = z.strictObject({
  force: z.optional(z.boolean()),
  model: z.optional(z.string()),
  auditorModel: z.optional(z.string()),
  variant: z.optional(z.string()),
  budget,
  review: z.optional(z.enum(['send', 'final'])),
});

/** Fields every request carries: the engine's secret, who asks, and what the asker runs with. */
const common = {
  secret: z.string(),
  /** The asking process (for the engine's log line only: not trusted for anything). */
  clientPid: z.int(),
  /** Whether the client wants the agent's live feed (--follow). */
  follow: z.optional(z.boolean()),
  /** Fingerprint of the client's settings and environment (see compatibilityKey). */
  compat: z.string(),
};

export const engineRequestSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('hello'), secret: z.string(), version: z.int() }),
  z.strictObject({ type: z.literal('start'), ...common, request: startRequest }),
  z.strictObject({ type: z.literal('restart'), ...common, ref, options: restartOptions }),
  z.strictObject({ type: z.literal('cancel'), secret: z.string(), ref }),
  /** The user's words to a loop this engine drives (`forge tell`, issue 29). */
  z.strictObject({ type: z.literal('tell'), secret: z.string(), ref, text: z.string().check(z.minLength(1), z.maxLength(MAX_USER_MESSAGE_CHARS)) }),
]);

export type EngineRequest =
  | { type: 'hello'; secret: string; version: number }
  | { type: 'start'; secret: string; clientPid: number; follow?: boolean; compat: string; request: StartLoopRequest }
  | { type: 'restart'; secret: string; clientPid: number; follow?: boolean; compat: string; ref: LoopRef; options: RestartLoopOptions }
  | { type: 'cancel'; secret: string; ref: LoopRef }
  | { type: 'tell'; secret: string; ref: LoopRef; text: string };

/** Why an engine refuses a request outright (before any loop is touched). */
export type RefusalCode = 'unauthorized' | 'bad_message' | 'incompatible' | 'closing' | 'version';

export type EngineReply =
  | { type: 'hello'; engine: EngineInfo }
  | { type: 'accepted'; ref: LoopRef; notices?: string[] }
  | { type: 'refused'; code: RefusalCode; message: string }
  /** The runtime refused the request (a LoopRuntimeError: bad plan, bad name, running …). */
  | { type: 'error'; code: string; message: string }
  | { type: 'event'; event: LoopRuntimeEvent }
  | { type: 'live'; event: LiveFeedEvent }
  | { type: 'cancelled' }
  | { type: 'told'; delivery: UserMessageDelivery; sessionId: string | null };

const loopEvent = z.looseObject({ type: z.string().check(z.startsWith('loop.')), loop: ref });
const engineInfo = z.strictObject({
  pid: z.int().check(z.positive()),
  supervisorId: z.string().check(z.minLength(1)),
  kind: z.enum(['cli', 'vscode']),
  started: z.number(),
  version: z.int(),
});

export const engineReplySchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('hello'), engine: engineInfo }),
  z.strictObject({ type: z.literal('accepted'), ref, notices: z.optional(z.array(z.string().check(z.maxLength(4000))).check(z.maxLength(50))) }),
  z.strictObject({ type: z.literal('refused'), code: z.enum(['unauthorized', 'bad_message', 'incompatible', 'closing', 'version']), message: z.string() }),
  z.strictObject({ type: z.literal('error'), code: z.string(), message: z.string() }),
  z.strictObject({ type: z.literal('event'), event: loopEvent }),
  z.strictObject({ type: z.literal('live'), event: z.looseObject({ type: z.enum(['session', 'part']), loop: ref }) }),
  z.strictObject({ type: z.literal('cancelled') }),
  z.strictObject({ type: z.literal('told'), delivery: z.enum(['session', 'next_session']), sessionId: z.nullable(z.string()) }),
]);

export const engineInfoSchema = engineInfo;

/** Parses one line as a request; a reason instead when it is not JSON or not a request. */
export function parseRequest(line: string): { ok: true; request: EngineRequest } | { ok: false; message: string } {
  return parseWith(line, engineRequestSchema) as { ok: true; request: EngineRequest } | { ok: false; message: string };
}

/** Parses one line as a reply. */
export function parseReply(line: string): { ok: true; reply: EngineReply } | { ok: false; message: string } {
  const r = parseWith(line, engineReplySchema);
  return r.ok ? { ok: true, reply: r.request as EngineReply } : r;
}

function parseWith(line: string, schema: z.ZodMiniType): { ok: true; request: unknown } | { ok: false; message: string } {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch (error) {
    return { ok: false, message: `not JSON (${(error as Error).message})` };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) return { ok: false, message: parsed.error.issues.map((i) => `${i.path.join('.') || '(message)'}: ${i.message}`).join('; ') };
  return { ok: true, request: parsed.data };
}

/** One message as one line. */
export function encodeMessage(message: EngineRequest | EngineReply): string {
  return JSON.stringify(message) + '\n';
}

/**
 * Splits a byte stream into lines. A line longer than MAX_LINE_CHARS is an error (the peer is
 * not speaking this protocol, or is hostile): the caller drops the connection.
 */
export class LineDecoder {
  private buffer = '';
  constructor(private readonly maxChars = MAX_LINE_CHARS) {}

  push(chunk: string): { lines: string[]; overflow: boolean } {
    this.buffer += chunk;
    const lines: string[] = [];
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      if (line.trim() !== '') lines.push(line);
    }
    return { lines, overflow: this.buffer.length > this.maxChars || lines.some((l) => l.length > this.maxChars) };
  }
}

/** Constant-time comparison of a presented secret with the engine's. */
export function secretMatches(presented: string, secret: string): boolean {
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(secret, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * What must be equal for a loop to run the same in the engine as in the asking process: the
 * resolved Forge settings, and the environment variables that reach opencode and choose models
 * or credentials. A loop is only handed to an engine with the same key; otherwise the asking
 * process supervises it itself (its own settings would silently not apply).
 */
export function compatibilityKey(settings: Record<string, unknown>, env: NodeJS.ProcessEnv): string {
  const relevant = Object.keys(env)
    .filter((k) => COMPAT_ENV.test(k))
    .sort()
    .map((k) => [k, env[k]]);
  // The merge mode travels in each start request (as --merge does), so it is no part of what must match.
  const { 'forge.loop.merge': _merge, ...compared } = settings;
  void _merge;
  // A hash: credentials are part of what is compared and never travel over the socket.
  return fingerprint({ settings: compared, env: relevant });
}

/** HOME/XDG (opencode's configuration), PATH (which opencode, git), models and credentials. */
const COMPAT_ENV = /^(HOME|PATH|FORGE_MODEL|XDG_[A-Z_]+|OPENCODE_[A-Z_]+|[A-Z0-9_]*(API_KEY|_TOKEN|_SECRET|_BASE_URL))$/;

/** The loop a runtime or live event is about, as one key. */
export function refKey(r: LoopRef): string {
  return `${r.projectId}\u0000${r.name}`;
}
