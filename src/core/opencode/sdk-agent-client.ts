/**
 * `AgentClient` over opencode's SDK (`@opencode-ai/sdk/v2`) — the only Forge module that
 * imports the SDK.
 *
 * Events: one SSE subscription per client, normalised by `event-normalizer.ts`. When the stream
 * drops it reconnects with back-off; a silent stream (no heartbeat, which opencode sends every
 * 10 s) counts as dropped. After a reconnect to the same server process, watched sessions are
 * reconciled through `session.status` so an idle that happened while disconnected is emitted
 * (once). When the server process died instead (supervisor event, or a new generation on
 * reconnect), every session that was working gets a `ServerLost` error and its idle.
 *
 * Usage: the stream's `message.updated` events carry every assistant message's tokens and cost,
 * so a session followed by an unbroken stream since its first prompt has its usage counted here,
 * without asking opencode for the session's messages (a request that competes with the next
 * session's turn). Any other session's usage is read from its messages.
 */
import { createOpencodeClient, type OpencodeClient } from '@opencode-ai/sdk/v2';
import {
  usageByModel,
  type AgentClient,
  type AgentEvent,
  type AgentEventListener,
  type AgentMessage,
  type AgentToolCall,
  type CreateSessionInput,
  type PermissionReply,
  type PromptInput,
  type ProviderCatalog,
  type SessionUsageByModel,
} from './agent-client';
import { livePartOfRaw, type LivePartUpdate } from '../live/live-parts';
import { createEventNormalizer, normalizeError, type RawOpencodeEvent } from './event-normalizer';
import { basicAuthHeader, type OpencodeEndpoint } from './server-process';
import type { OpencodeServerHandle } from './server-supervisor';

export interface SdkAgentClientOptions {
  server: OpencodeServerHandle;
  /** The project directory sessions live in (the worktree). */
  directory: string;
  /** No event (opencode sends a heartbeat every 10 s) for this long means the stream is dead. Default 35 s. */
  staleStreamMs?: number;
  reconnectInitialDelayMs?: number;
  reconnectMaxDelayMs?: number;
  log?: (message: string) => void;
}

export class AgentClientError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'AgentClientError';
  }
}

interface SdkResult<T> {
  data?: T;
  error?: unknown;
  response?: Response;
}

export function createSdkAgentClient(options: SdkAgentClientOptions): AgentClient {
  const { server, directory } = options;
  const log = options.log ?? (() => {});
  const normalizer = createEventNormalizer();
  const listeners = new Set<AgentEventListener>();
  const watched = new Set<string>();
  const staleMs = options.staleStreamMs ?? 35_000;
  const initialDelay = options.reconnectInitialDelayMs ?? 250;
  const maxDelay = options.reconnectMaxDelayMs ?? 10_000;
  let sdkCache: { key: string; client: OpencodeClient } | undefined;
  let streamStarted = false;
  let closed = false;
  let abortStream: AbortController | undefined;
  let lossReported = false;
  /** Bumped at every (re)connect and loss: a session's ledger is whole only within one epoch. */
  let streamEpoch = 0;
  let streamLive = false;
  /** Sessions first prompted while the stream was live, with that epoch, and their assistant messages by id. */
  const ledgers = new Map<string, { epoch: number; messages: Map<string, AgentMessage> }>();
  /** Sessions first prompted while the stream was away: their usage is always read from their messages. */
  const unledgered = new Set<string>();

  const emit = (events: AgentEvent[]) => {
    for (const event of events) {
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (error) {
          log(`agent event listener failed on ${event.type}: ${String(error)}`);
        }
      }
    }
  };

  const unsubscribeServer = server.onEvent((event) => {
    if (event.type === 'exited') {
      log(`opencode server exited (code ${event.exit.code}, signal ${event.exit.signal})`);
      emit(normalizer.serverLost(`The opencode server stopped (code ${event.exit.code}, signal ${event.exit.signal}) while this session was working; Forge restarts it.`));
      abortStream?.abort();
    } else if (event.type === 'gave-up') {
      emit([{ type: 'stream.lost', error: event.error }]);
    }
  });

  function sdkFor(endpoint: OpencodeEndpoint): OpencodeClient {
    const key = `${endpoint.url}|${endpoint.password}`;
    if (sdkCache?.key !== key) {
      sdkCache = {
        key,
        client: createOpencodeClient({ baseUrl: endpoint.url, directory, headers: { authorization: basicAuthHeader(endpoint) } }),
      };
    }
    return sdkCache.client;
  }

  async function sdk(): Promise<OpencodeClient> {
    return sdkFor(await server.waitForEndpoint());
  }

  function unwrap<T>(result: SdkResult<T>, what: string): T {
    if (result.error !== undefined || (result.response && !result.response.ok)) {
      const status = result.response?.status;
      throw new AgentClientError(`opencode refused to ${what}${status ? ` (HTTP ${status})` : ''}: ${describe(result.error)}`, status);
    }
    return result.data as T;
  }

  async function fetchStatus(): Promise<Record<string, 'busy' | 'idle' | 'retry'>> {
    const data = unwrap(await (await sdk()).session.status({}), 'read session status') as Record<string, { type: string }>;
    const result: Record<string, 'busy' | 'idle' | 'retry'> = {};
    for (const [id, status] of Object.entries(data ?? {})) {
      if (status.type === 'busy' || status.type === 'idle' || status.type === 'retry') result[id] = status.type;
    }
    return result;
  }

  async function fetchMessages(sessionId: string): Promise<AgentMessage[]> {
    const data = unwrap(await (await sdk()).session.messages({ sessionID: sessionId }), `read the messages of session ${sessionId}`);
    return (data as unknown as Array<{ info: Record<string, unknown>; parts: Array<Record<string, unknown>> }>).map(toAgentMessage);
  }

  function recordMessageUsage(raw: RawOpencodeEvent): void {
    const info = (raw.properties?.info ?? undefined) as Record<string, unknown> | undefined;
    if (!info || info.role !== 'assistant' || typeof info.sessionID !== 'string' || typeof info.id !== 'string') return;
    const ledger = ledgers.get(info.sessionID);
    if (!ledger || ledger.epoch !== streamEpoch) return;
    ledger.messages.set(info.id, toAgentMessage({ info, parts: [] }));
  }

  /** The session's usage from its ledger, when the ledger is whole and every reply in it finished. */
  function ledgerUsage(sessionId: string): SessionUsageByModel[] | undefined {
    const ledger = ledgers.get(sessionId);
    if (!ledger || !streamLive || ledger.epoch !== streamEpoch) return undefined;
    const messages = [...ledger.messages.values()];
    if (messages.some((m) => m.completedAt === undefined && m.error === undefined)) return undefined;
    return usageByModel(messages);
  }

  async function reconcileWatched(): Promise<void> {
    if (watched.size === 0) return;
    const status = await fetchStatus();
    for (const sessionId of watched) {
      const now = status[sessionId] ?? 'idle';
      let turnFinished = false;
      if (now === 'idle' && normalizer.stateOf(sessionId) === 'prompted') {
        turnFinished = latestTurnFinished(await fetchMessages(sessionId));
      }
      emit(normalizer.reconcile(sessionId, now, turnFinished));
    }
  }

  async function runStream(): Promise<void> {
    let attempt = 0;
    let connectedGeneration: number | undefined;
    while (!closed) {
      let endpoint: OpencodeEndpoint;
      try {
        endpoint = await server.waitForEndpoint(60_000);
      } catch (error) {
        if (closed) return;
        if (!lossReported) {
          lossReported = true;
          emit([{ type: 'stream.lost', error: String(error) }]);
        }
        await sleep(maxDelay);
        continue;
      }
      const generation = server.generation();
      const controller = new AbortController();
      abortStream = controller;
      let staleTimer: NodeJS.Timeout | undefined;
      const armStaleTimer = () => {
        if (staleTimer) clearTimeout(staleTimer);
        staleTimer = setTimeout(() => controller.abort(), staleMs);
      };
      try {
        armStaleTimer();
        const subscription = await sdkFor(endpoint).event.subscribe({}, {
          signal: controller.signal,
          sseMaxRetryAttempts: 1,
        } as never);
        for await (const raw of subscription.stream as AsyncIterable<RawOpencodeEvent>) {
          armStaleTimer();
          if (!raw || typeof raw !== 'object') continue;
          if (raw.type === 'server.connected') {
            attempt = 0;
            const reconnect = connectedGeneration !== undefined;
            if (reconnect && generation !== connectedGeneration) {
              emit(normalizer.serverLost('The opencode server was restarted while this session was working.'));
            } else if (reconnect) {
              await reconcileWatched().catch((error: unknown) => log(`reconcile after reconnect failed: ${String(error)}`));
            }
            connectedGeneration = generation;
            lossReported = false;
            streamEpoch += 1;
            streamLive = true;
            emit([{ type: 'stream.connected', reconnect }]);
            continue;
          }
          if (raw.type === 'message.updated') recordMessageUsage(raw);
          emit(normalizer.normalize(raw));
        }
      } catch (error) {
        if (!closed) log(`event stream failed: ${String(error)}`);
      } finally {
        if (staleTimer) clearTimeout(staleTimer);
        // Whatever happened while the stream was away is not in the ledgers.
        streamLive = false;
        streamEpoch += 1;
      }
      if (closed) return;
      if (!lossReported && connectedGeneration !== undefined) {
        lossReported = true;
        emit([{ type: 'stream.lost', error: 'The opencode event stream ended; reconnecting.' }]);
      }
      attempt += 1;
      await sleep(Math.min(initialDelay * 2 ** (attempt - 1), maxDelay));
    }
  }

  function ensureStream(): void {
    if (streamStarted || closed) return;
    streamStarted = true;
    void runStream();
  }

  return {
    async createSession(input: CreateSessionInput) {
      const body: Record<string, unknown> = { title: input.title };
      if (input.agent) body.agent = input.agent;
      if (input.model) body.model = { providerID: input.model.providerId, id: input.model.modelId, ...(input.model.variant ? { variant: input.model.variant } : {}) };
      if (input.permission) body.permission = input.permission;
      if (input.parentSessionId) body.parentID = input.parentSessionId;
      const data = unwrap(await (await sdk()).session.create(body as never), `create a session "${input.title}"`) as { id: string; parentID?: string };
      normalizer.recordParent(data.id, data.parentID);
      return { id: data.id };
    },
    async promptAsync(input: PromptInput) {
      const body: Record<string, unknown> = { sessionID: input.sessionId, parts: [{ type: 'text', text: input.text }] };
      if (input.agent) body.agent = input.agent;
      if (input.model) body.model = { providerID: input.model.providerId, modelID: input.model.modelId };
      const variant = input.variant || input.model?.variant;
      if (variant) body.variant = variant;
      if (input.system) body.system = input.system;
      // A session first prompted while the stream is live: the stream shows every reply it gets.
      if (!ledgers.has(input.sessionId) && !unledgered.has(input.sessionId)) {
        if (streamLive) ledgers.set(input.sessionId, { epoch: streamEpoch, messages: new Map() });
        else unledgered.add(input.sessionId);
      }
      normalizer.markPrompted(input.sessionId);
      unwrap(await (await sdk()).session.promptAsync(body as never), `send a prompt to session ${input.sessionId}`);
    },
    async abort(sessionId) {
      unwrap(await (await sdk()).session.abort({ sessionID: sessionId }), `abort session ${sessionId}`);
    },
    messages: fetchMessages,
    async liveParts(sessionId) {
      const data = unwrap(await (await sdk()).session.messages({ sessionID: sessionId }), `read the messages of session ${sessionId}`);
      const updates: LivePartUpdate[] = [];
      for (const entry of data as unknown as Array<{ info?: { role?: string }; parts?: Array<Record<string, unknown>> }>) {
        for (const part of entry.parts ?? []) {
          const update = livePartOfRaw(part, sessionId);
          if (update) updates.push(entry.info?.role === 'user' ? { ...update, fromUser: true } : update);
        }
      }
      return updates;
    },
    async usage(sessionId) {
      return ledgerUsage(sessionId) ?? usageByModel(await fetchMessages(sessionId));
    },
    usageSoFar(sessionId) {
      const ledger = ledgers.get(sessionId);
      if (!ledger || !streamLive || ledger.epoch !== streamEpoch) return undefined;
      return usageByModel([...ledger.messages.values()]);
    },
    async deleteSession(sessionId) {
      watched.delete(sessionId);
      ledgers.delete(sessionId);
      unledgered.delete(sessionId);
      unwrap(await (await sdk()).session.delete({ sessionID: sessionId }), `delete session ${sessionId}`);
    },
    async setSessionTitle(sessionId, title) {
      unwrap(await (await sdk()).session.update({ sessionID: sessionId, title }), `rename session ${sessionId}`);
    },
    async children(sessionId) {
      const data = unwrap(await (await sdk()).session.children({ sessionID: sessionId }), `list the subsessions of ${sessionId}`) as Array<{ id: string }>;
      for (const child of data) normalizer.recordParent(child.id, sessionId);
      return data.map((c) => c.id);
    },
    async providers(): Promise<ProviderCatalog> {
      const client = await sdk();
      const [listed, config] = await Promise.all([client.config.providers({}), client.config.get({})]);
      const resolved = unwrap(config, 'read the configuration') as { model?: unknown };
      const data = unwrap(listed, 'list providers') as {
        providers: Array<{ id: string; name: string; models: Record<string, Record<string, unknown>> }>;
        default: Record<string, string>;
      };
      return {
        providers: data.providers.map((p) => ({
          id: p.id,
          name: p.name,
          models: Object.entries(p.models).map(([id, m]) => {
            const caps = (m.capabilities ?? {}) as Record<string, unknown>;
            const limit = (m.limit ?? {}) as Record<string, unknown>;
            return {
              providerId: p.id,
              modelId: String(m.id ?? id),
              name: String(m.name ?? id),
              toolCall: caps.toolcall === true,
              reasoning: caps.reasoning === true,
              contextLimit: Number(limit.context ?? 0),
              outputLimit: Number(limit.output ?? 0),
              variants: Object.keys((m.variants ?? {}) as Record<string, unknown>),
              ...priceOf(m.cost),
            };
          }),
        })),
        defaults: data.default ?? {},
        configuredModel: typeof resolved.model === 'string' && resolved.model.trim() ? resolved.model.trim() : null,
      };
    },
    async agents() {
      const data = unwrap(await (await sdk()).app.agents({}), 'list agents') as Array<{ name: string }>;
      return data.map((a) => a.name);
    },
    async replyPermission(requestId: string, reply: PermissionReply, message?: string) {
      const body: Record<string, unknown> = { requestID: requestId, reply };
      if (message) body.message = message;
      unwrap(await (await sdk()).permission.reply(body as never), `answer permission request ${requestId}`);
    },
    async rejectQuestion(requestId) {
      unwrap(await (await sdk()).question.reject({ requestID: requestId } as never), `reject question ${requestId}`);
    },
    sessionStatus: fetchStatus,
    watchSession(sessionId) {
      watched.add(sessionId);
    },
    unwatchSession(sessionId) {
      watched.delete(sessionId);
    },
    subscribe(listener) {
      listeners.add(listener);
      ensureStream();
      return () => listeners.delete(listener);
    },
    async close() {
      closed = true;
      unsubscribeServer();
      abortStream?.abort();
      listeners.clear();
    },
  };
}

/** The latest user message has an assistant reply that completed or failed. */
function latestTurnFinished(messages: AgentMessage[]): boolean {
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  if (!lastUser) return false;
  return messages.some((m) => m.role === 'assistant' && m.parentId === lastUser.id && (m.completedAt !== undefined || m.error !== undefined));
}

function toAgentMessage(entry: { info: Record<string, unknown>; parts: Array<Record<string, unknown>> }): AgentMessage {
  const info = entry.info;
  const tokens = (info.tokens ?? {}) as Record<string, unknown>;
  const cache = (tokens.cache ?? {}) as Record<string, unknown>;
  const time = (info.time ?? {}) as Record<string, unknown>;
  const toolCalls: AgentToolCall[] = [];
  let text = '';
  let finishReason: string | undefined;
  for (const part of entry.parts ?? []) {
    if (part.type === 'text' && part.synthetic !== true) text += String(part.text ?? '');
    else if (part.type === 'tool') {
      const state = (part.state ?? {}) as Record<string, unknown>;
      const status = state.status === 'running' || state.status === 'completed' || state.status === 'error' ? state.status : 'pending';
      const call: AgentToolCall = { callId: String(part.callID ?? ''), tool: String(part.tool ?? ''), status, input: state.input };
      if (typeof state.output === 'string') call.output = state.output;
      if (typeof state.error === 'string') call.error = state.error;
      toolCalls.push(call);
    } else if (part.type === 'step-finish' && typeof part.reason === 'string') finishReason = part.reason;
  }
  const message: AgentMessage = {
    id: String(info.id),
    sessionId: String(info.sessionID),
    role: info.role === 'assistant' ? 'assistant' : 'user',
    createdAt: Number(time.created ?? 0),
    usage: {
      input: Number(tokens.input ?? 0),
      output: Number(tokens.output ?? 0),
      reasoning: Number(tokens.reasoning ?? 0),
      cacheRead: Number(cache.read ?? 0),
      cacheWrite: Number(cache.write ?? 0),
    },
    cost: Number(info.cost ?? 0),
    text,
    toolCalls,
  };
  if (typeof info.parentID === 'string') message.parentId = info.parentID;
  if (typeof info.agent === 'string') message.agent = info.agent;
  const model = (info.model ?? {}) as Record<string, unknown>;
  const providerId = info.providerID ?? model.providerID;
  const modelId = info.modelID ?? model.modelID;
  if (typeof providerId === 'string') message.providerId = providerId;
  if (typeof modelId === 'string') message.modelId = modelId;
  if (typeof time.completed === 'number') message.completedAt = time.completed;
  if (info.error) message.error = normalizeError(info.error);
  if (finishReason) message.finishReason = finishReason;
  return message;
}

function describe(error: unknown): string {
  if (error === undefined || error === null) return 'no details';
  if (typeof error === 'string') return error;
  if (error instanceof Error) return error.message;
  try {
    const e = error as Record<string, unknown>;
    const data = (e.data ?? {}) as Record<string, unknown>;
    return String(data.message ?? e.message ?? JSON.stringify(error));
  } catch {
    return String(error);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Adds a remote MCP server to a running opencode (an attached server, where Forge cannot
 * configure the server at start; a shared server, whose configuration names no loop's tools).
 * Applies to the instance of `directory` only.
 */
export async function addRemoteMcpServer(
  endpoint: OpencodeEndpoint,
  directory: string,
  name: string,
  entry: { type: 'remote'; url: string; headers: Record<string, string>; oauth: false; enabled: true; timeout: number },
): Promise<void> {
  const client = createOpencodeClient({ baseUrl: endpoint.url, directory, headers: { authorization: basicAuthHeader(endpoint) } });
  const result = (await client.mcp.add({ name, config: entry } as never)) as SdkResult<unknown>;
  if (result.error !== undefined || (result.response && !result.response.ok)) {
    throw new AgentClientError(`opencode at ${endpoint.url} refused to add Forge's tool server: ${describe(result.error)}`, result.response?.status);
  }
}

/** Releases the instance of `directory` in a running opencode (its sessions stay stored); errors are the caller's to log. */
export async function disposeOpencodeInstance(endpoint: OpencodeEndpoint, directory: string): Promise<void> {
  const client = createOpencodeClient({ baseUrl: endpoint.url, directory, headers: { authorization: basicAuthHeader(endpoint) } });
  const result = (await client.instance.dispose()) as SdkResult<unknown>;
  if (result.error !== undefined || (result.response && !result.response.ok)) {
    throw new AgentClientError(`opencode at ${endpoint.url} did not release the instance of ${directory}: ${describe(result.error)}`, result.response?.status);
  }
}

/** A catalog model's price per million tokens, when opencode states one. */
function priceOf(cost: unknown): { cost?: { input: number; output: number } } {
  if (!cost || typeof cost !== 'object') return {};
  const { input, output } = cost as Record<string, unknown>;
  const i = Number(input);
  const o = Number(output);
  return Number.isFinite(i) && Number.isFinite(o) ? { cost: { input: i, output: o } } : {};
}
