import type { LivePartUpdate } from '../live/live-parts';

/**
 * The port the loop engine depends on to drive agent sessions. One adapter implements it over
 * opencode's SDK (`sdk-agent-client.ts`); nothing else in Forge imports the SDK, so the engine
 * sees only these types.
 */

/** opencode's permission rule: the last rule that matches a request decides. */
export interface PermissionRule {
  permission: string;
  pattern: string;
  action: 'allow' | 'deny' | 'ask';
}

export interface ModelRef {
  providerId: string;
  modelId: string;
  variant?: string;
}

export interface CreateSessionInput {
  /** opencode agent name, e.g. `forge-code`. */
  agent?: string;
  model?: ModelRef;
  /** Always give one: a session without a title makes opencode ask the model for one. */
  title: string;
  permission?: PermissionRule[];
  parentSessionId?: string;
}

export interface PromptInput {
  sessionId: string;
  text: string;
  agent?: string;
  model?: ModelRef;
  /** Model variant for this message (opencode's name, e.g. "high"); overrides `model.variant`. */
  variant?: string;
  /** Extra system prompt for this message only. */
  system?: string;
}

export interface TokenUsage {
  input: number;
  output: number;
  reasoning: number;
  cacheRead: number;
  cacheWrite: number;
}

export interface AgentError {
  /** opencode's error name: `APIError`, `MessageAbortedError`, `ProviderAuthError`, … or Forge's `ServerLost`. */
  name: string;
  message: string;
  statusCode?: number;
  retryable?: boolean;
}

export interface AgentToolCall {
  callId: string;
  tool: string;
  status: 'pending' | 'running' | 'completed' | 'error';
  input: unknown;
  output?: string;
  error?: string;
}

export interface AgentMessage {
  id: string;
  sessionId: string;
  role: 'user' | 'assistant';
  /** For assistant messages: the user message they answer. */
  parentId?: string;
  agent?: string;
  providerId?: string;
  modelId?: string;
  createdAt: number;
  completedAt?: number;
  /** Zero for user messages. */
  usage: TokenUsage;
  cost: number;
  error?: AgentError;
  /** Concatenated text parts (not synthetic ones). */
  text: string;
  toolCalls: AgentToolCall[];
  /** `step-finish` reason of the last step (`stop`, `tool-calls`, …). */
  finishReason?: string;
}

export interface SessionUsageByModel {
  providerId: string;
  modelId: string;
  usage: TokenUsage;
  cost: number;
  /** Assistant messages counted. */
  messages: number;
}

export interface ModelInfo {
  providerId: string;
  modelId: string;
  name: string;
  toolCall: boolean;
  reasoning: boolean;
  contextLimit: number;
  outputLimit: number;
  variants: string[];
  /** Price per million tokens as opencode's catalog states it (absent: unknown). */
  cost?: { input: number; output: number };
}

export interface ProviderInfo {
  id: string;
  name: string;
  models: ModelInfo[];
}

export interface ProviderCatalog {
  providers: ProviderInfo[];
  /** Default model id per provider id, as opencode reports it. */
  defaults: Record<string, string>;
  /** opencode's own default model (its resolved configuration's `model`), when the catalog was read with it. */
  configuredModel?: string | null;
}

export interface PermissionRequest {
  id: string;
  sessionId: string;
  permission: string;
  patterns: string[];
  metadata: Record<string, unknown>;
  tool?: { messageId: string; callId: string };
}

export type PermissionReply = 'once' | 'always' | 'reject';

export type ActivityKind = 'tool' | 'text' | 'reasoning' | 'step';

/**
 * opencode events after normalisation. `rootSessionId` is the top-level session a child
 * (subagent) session belongs to, so the runtime can count subagent progress for its loop.
 */
export type AgentEvent =
  | { type: 'session.busy'; sessionId: string; rootSessionId: string }
  /**
   * Emitted once per busy→idle change. `reconciled` marks an idle found by polling
   * `session.status` after the event stream came back, not received as an event.
   */
  | { type: 'session.idle'; sessionId: string; rootSessionId: string; reconciled?: boolean }
  | { type: 'session.error'; sessionId: string | undefined; rootSessionId: string | undefined; error: AgentError }
  | { type: 'session.retry'; sessionId: string; rootSessionId: string; attempt: number; message: string; nextAt: number }
  | {
      type: 'activity';
      sessionId: string;
      rootSessionId: string;
      kind: ActivityKind;
      messageId: string;
      tool?: string;
      toolStatus?: AgentToolCall['status'];
      /** The tool call's id (tool activity only). */
      callId?: string;
      /** The tool call's arguments as opencode reports them (tool activity only). */
      toolInput?: Record<string, unknown>;
      /** The part's content for the live view (absent for step marks and parts it does not show). */
      part?: LivePartUpdate;
    }
  | { type: 'session.created'; sessionId: string; parentSessionId?: string; rootSessionId: string }
  | { type: 'permission.asked'; rootSessionId: string; request: PermissionRequest }
  | { type: 'question.asked'; sessionId: string; rootSessionId: string; requestId: string }
  /** The event stream connected (again); after a loss, watched sessions were reconciled first. */
  | { type: 'stream.connected'; reconnect: boolean }
  | { type: 'stream.lost'; error: string };

export type AgentEventListener = (event: AgentEvent) => void;

export interface AgentClient {
  createSession(input: CreateSessionInput): Promise<{ id: string }>;
  /** Sends a prompt and returns at once; progress arrives as events. */
  promptAsync(input: PromptInput): Promise<void>;
  abort(sessionId: string): Promise<void>;
  messages(sessionId: string): Promise<AgentMessage[]>;
  /** A session's parts as the live view shows them, oldest first (read from opencode's stored messages). */
  liveParts(sessionId: string): Promise<LivePartUpdate[]>;
  /** Usage of one session's assistant messages, per provider/model. */
  usage(sessionId: string): Promise<SessionUsageByModel[]>;
  /**
   * What a session has used so far while it runs, as opencode's events reported it after each
   * model step (no round trip); undefined when the event stream did not see all of it.
   */
  usageSoFar?(sessionId: string): SessionUsageByModel[] | undefined;
  deleteSession(sessionId: string): Promise<void>;
  setSessionTitle(sessionId: string, title: string): Promise<void>;
  /** Child (subagent) sessions of a session. */
  children(sessionId: string): Promise<string[]>;
  providers(): Promise<ProviderCatalog>;
  /** Agent names opencode knows (to check Forge's agents are configured). */
  agents(): Promise<string[]>;
  replyPermission(requestId: string, reply: PermissionReply, message?: string): Promise<void>;
  rejectQuestion(requestId: string): Promise<void>;
  /** Busy/idle/retry per session, from opencode (sessions not listed are idle). */
  sessionStatus(): Promise<Record<string, 'busy' | 'idle' | 'retry'>>;
  /**
   * Sessions whose idle must not be lost when the stream drops: after a reconnect their status
   * is polled and a missed idle is emitted (once).
   */
  watchSession(sessionId: string): void;
  unwatchSession(sessionId: string): void;
  subscribe(listener: AgentEventListener): () => void;
  close(): Promise<void>;
}

export const ZERO_USAGE: TokenUsage = Object.freeze({ input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 });

export function addUsage(a: TokenUsage, b: TokenUsage): TokenUsage {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    reasoning: a.reasoning + b.reasoning,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
  };
}

/** Totals assistant messages per provider/model (user messages carry no usage). */
export function usageByModel(messages: readonly AgentMessage[]): SessionUsageByModel[] {
  const byKey = new Map<string, SessionUsageByModel>();
  for (const m of messages) {
    if (m.role !== 'assistant' || !m.providerId || !m.modelId) continue;
    const key = `${m.providerId}/${m.modelId}`;
    const entry = byKey.get(key) ?? { providerId: m.providerId, modelId: m.modelId, usage: ZERO_USAGE, cost: 0, messages: 0 };
    byKey.set(key, { ...entry, usage: addUsage(entry.usage, m.usage), cost: entry.cost + m.cost, messages: entry.messages + 1 });
  }
  return [...byKey.values()];
}

export function parseModelRef(value: string): ModelRef {
  const slash = value.indexOf('/');
  if (slash <= 0 || slash === value.length - 1) {
    throw new Error(`Model "${value}" must be written as "provider/model", for example "anthropic/claude-sonnet-4-5".`);
  }
  return { providerId: value.slice(0, slash), modelId: value.slice(slash + 1) };
}
