/**
 * The only fake in Forge's tests, and Forge's embedded model (see embedded-model.ts): an OpenAI-compatible chat-completions server on 127.0.0.1
 * that answers from a script. opencode talks to it through its `@ai-sdk/openai-compatible`
 * provider (see `writeOpencodeTestEnvironment` in `opencode-test-env.ts`).
 *
 * Scripting: queue steps (`model.enqueue(text('hi'), toolCall('write', {...}))`), or install a
 * handler `(request, ctx) => Step` that decides from what the agent was told (system prompt,
 * latest tool results, session id). Title-generation requests (opencode asks the small model
 * for a session title, without tools) are answered automatically and never consume a step.
 * Every request is recorded in `model.requests`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedUsage {
  input: number;
  output: number;
  /** Reported as `completion_tokens_details.reasoning_tokens` (part of `output`, as OpenAI counts). */
  reasoning?: number;
  /** Reported as `prompt_tokens_details.cached_tokens` (part of `input`, as OpenAI counts). */
  cacheRead?: number;
}

export interface ScriptedToolCall {
  /** The tool name exactly as opencode lists it: `write`, `bash`, `forge_loop_handoff`, … */
  name: string;
  /** Arguments object (serialised to JSON) or a raw string sent verbatim (to script broken JSON). */
  args: Record<string, unknown> | string;
  id?: string;
}

/**
 * How a step's text is streamed, when not in three chunks at once: these pieces (their
 * concatenation is the text), one every `intervalMs` (a steady rate, as a live-view benchmark needs).
 */
export interface ScriptedPacing {
  pieces: string[];
  intervalMs: number;
}

export type ScriptStep =
  | { kind: 'text'; text: string; reasoning?: string; usage?: ScriptedUsage; pacing?: ScriptedPacing }
  | { kind: 'tool-calls'; calls: ScriptedToolCall[]; text?: string; usage?: ScriptedUsage; pacing?: ScriptedPacing }
  | { kind: 'http-error'; status: number; body?: string; headers?: Record<string, string> }
  /** Sends the response headers and a first role chunk, then nothing until the model closes. */
  | { kind: 'hang' }
  /** Sends a chunk that is not valid JSON, then ends the stream. */
  | { kind: 'malformed' };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content?: unknown;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  name?: string;
}

export interface ToolResult {
  toolCallId: string;
  /** Name of the tool, found from the assistant message that issued the call. */
  name: string | undefined;
  content: string;
}

export interface ScriptedRequest {
  /** 0-based position among all requests this model received. */
  index: number;
  /** opencode's session id, from the `x-session-id` header it sends with each model request. */
  sessionId: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
  model: string;
  stream: boolean;
  /** All system messages joined by a blank line (the agent prompt plus opencode's environment block). */
  system: string;
  messages: ChatMessage[];
  /** Names of the tools offered to the model in this request. */
  toolNames: string[];
  /** opencode's title-generation call: answered automatically, never consumes a scripted step. */
  isTitleRequest: boolean;
  /** Text of the latest user message. */
  lastUserText: string;
  /** Tool results sent after the latest assistant message (what the last tool calls returned). */
  toolResults: ToolResult[];
}

export interface ScriptContext {
  /** Every request recorded so far, this one included. */
  requests: readonly ScriptedRequest[];
  /** Non-title requests from the same opencode session before this one (0 for the first). */
  turnInSession: number;
}

export type ScriptHandler = (request: ScriptedRequest, ctx: ScriptContext) => ScriptStep | Promise<ScriptStep>;

export interface ScriptedModel {
  /** OpenAI-compatible base URL, e.g. `http://127.0.0.1:PORT/v1`. */
  readonly baseURL: string;
  readonly port: number;
  readonly requests: readonly ScriptedRequest[];
  /** Non-title requests only (what the agents were told). */
  readonly agentRequests: readonly ScriptedRequest[];
  enqueue(...steps: ScriptStep[]): void;
  /** Handler consulted when the queue is empty. */
  setHandler(handler: ScriptHandler | undefined): void;
  /** Resolves with the next request that matches (already received requests count). */
  waitForRequest(predicate: (request: ScriptedRequest) => boolean, timeoutMs?: number): Promise<ScriptedRequest>;
  close(): Promise<void>;
}

export interface ScriptedModelOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  handler?: ScriptHandler;
  /** Answer when neither queue nor handler gives a step. Default: a short text reply. */
  fallback?: ScriptStep;
  /** Title returned to title-generation requests. */
  title?: string;
  modelId?: string;
}

export const DEFAULT_SCRIPTED_USAGE: ScriptedUsage = { input: 10, output: 5 };

export function text(value: string, usage?: ScriptedUsage): ScriptStep {
  return usage ? { kind: 'text', text: value, usage } : { kind: 'text', text: value };
}

export function toolCall(name: string, args: Record<string, unknown> | string, usage?: ScriptedUsage): ScriptStep {
  return usage ? { kind: 'tool-calls', calls: [{ name, args }], usage } : { kind: 'tool-calls', calls: [{ name, args }] };
}

export function toolCalls(calls: ScriptedToolCall[], usage?: ScriptedUsage): ScriptStep {
  return usage ? { kind: 'tool-calls', calls, usage } : { kind: 'tool-calls', calls };
}

export function httpError(status: number, body?: string): ScriptStep {
  return body === undefined ? { kind: 'http-error', status } : { kind: 'http-error', status, body };
}

export const hang: ScriptStep = { kind: 'hang' };
export const malformed: ScriptStep = { kind: 'malformed' };

/** Which Forge agent a request is for, from its system prompt (`… (forge-code) …`). */
export function forgeAgentOf(request: Pick<ScriptedRequest, 'system'>): 'forge-code' | 'forge-auditor' | 'forge-architect' | 'forge-splitter' | undefined {
  const match = /\((forge-code|forge-auditor|forge-architect|forge-splitter)\)/.exec(request.system);
  return match ? (match[1] as 'forge-code' | 'forge-auditor' | 'forge-architect' | 'forge-splitter') : undefined;
}

/** Name opencode gives an MCP tool: `<server>_<tool>` with anything outside [a-zA-Z0-9_-] replaced by `_`. */
export function mcpToolName(server: string, tool: string): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, '_');
  return `${clean(server)}_${clean(tool)}`;
}

export async function startScriptedModel(options: ScriptedModelOptions = {}): Promise<ScriptedModel> {
  const queue: ScriptStep[] = [];
  const requests: ScriptedRequest[] = [];
  const openResponses = new Set<ServerResponse>();
  const waiters: Array<{ predicate: (r: ScriptedRequest) => boolean; resolve: (r: ScriptedRequest) => void }> = [];
  let handler = options.handler;
  const fallback = options.fallback ?? text('Done.');
  const title = options.title ?? 'Scripted session';
  const modelId = options.modelId ?? 'fake-1';
  let completionCounter = 0;

  const server: Server = createServer((req, res) => {
    void route(req, res).catch((error: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `scripted model crashed: ${String(error)}`, type: 'scripted_model_bug' } }));
      } else {
        res.destroy();
      }
    });
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0] ?? '';
    if (req.method === 'GET' && path.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: modelId, object: 'model', owned_by: 'forge-tests' }] }));
      return;
    }
    if (req.method !== 'POST' || !path.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `scripted model: no route ${req.method} ${path}` } }));
      return;
    }
    const raw = await readBody(req);
    const body = JSON.parse(raw) as Record<string, unknown>;
    const request = describeRequest(requests.length, req, body);
    requests.push(request);
    for (const waiter of [...waiters]) {
      if (waiter.predicate(request)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(request);
      }
    }
    const step = request.isTitleRequest ? text(title, { input: 1, output: 1 }) : await nextStep(request);
    openResponses.add(res);
    res.on('close', () => openResponses.delete(res));
    await respond(res, request, step);
  }

  async function nextStep(request: ScriptedRequest): Promise<ScriptStep> {
    const queued = queue.shift();
    if (queued) return queued;
    if (handler) {
      const turnInSession = requests.filter(
        (r) => !r.isTitleRequest && r.index < request.index && r.sessionId === request.sessionId,
      ).length;
      return handler(request, { requests, turnInSession });
    }
    return fallback;
  }

  async function respond(res: ServerResponse, request: ScriptedRequest, step: ScriptStep): Promise<void> {
    const id = `chatcmpl-${++completionCounter}`;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      JSON.stringify({ id, object: 'chat.completion.chunk', created, model: modelId, choices, ...extra });

    if (step.kind === 'http-error') {
      res.writeHead(step.status, { 'content-type': 'application/json', ...(step.headers ?? {}) });
      res.end(step.body ?? JSON.stringify({ error: { message: `scripted failure ${step.status}`, type: 'scripted_error', code: step.status } }));
      return;
    }

    if (!request.stream) {
      respondWithoutStreaming(res, id, created, step);
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (data: string) => res.write(`data: ${data}\n\n`);
    send(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]));

    if (step.kind === 'hang') return; // left open until the client gives up or the model closes
    if (step.kind === 'malformed') {
      send('{"id": "broken", "choices": [ {"delta": ');
      res.end();
      return;
    }

    const usage = step.usage ?? DEFAULT_SCRIPTED_USAGE;
    if (step.kind === 'text' && step.reasoning) {
      for (const piece of splitForStreaming(step.reasoning)) {
        send(chunk([{ index: 0, delta: { reasoning_content: piece }, finish_reason: null }]));
      }
    }
    const prose = step.text ?? '';
    if (step.pacing) {
      // On a schedule from the start (not interval after interval), so timer slack does not slow the rate.
      const start = Date.now();
      for (let i = 0; i < step.pacing.pieces.length; i++) {
        const wait = start + i * step.pacing.intervalMs - Date.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        if (res.destroyed) return;
        send(chunk([{ index: 0, delta: { content: step.pacing.pieces[i] }, finish_reason: null }]));
      }
    } else {
      for (const piece of splitForStreaming(prose)) {
        send(chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]));
      }
    }
    let finish = 'stop';
    if (step.kind === 'tool-calls') {
      finish = 'tool_calls';
      step.calls.forEach((call, index) => {
        const callId = call.id ?? `call_${completionCounter}_${index}`;
        const args = typeof call.args === 'string' ? call.args : JSON.stringify(call.args);
        send(
          chunk([
            {
              index: 0,
              delta: { tool_calls: [{ index, id: callId, type: 'function', function: { name: call.name, arguments: args } }] },
              finish_reason: null,
            },
          ]),
        );
      });
    }
    send(chunk([{ index: 0, delta: {}, finish_reason: finish }]));
    send(chunk([], { usage: usageBody(usage) }));
    res.write('data: [DONE]\n\n');
    res.end();
  }

  function respondWithoutStreaming(res: ServerResponse, id: string, created: number, step: ScriptStep): void {
    if (step.kind === 'hang') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return;
    }
    if (step.kind === 'malformed') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id": "broken", ');
      return;
    }
    if (step.kind === 'http-error') return; // handled before
    const message: Record<string, unknown> = { role: 'assistant', content: step.text ?? '' };
    if (step.kind === 'tool-calls') {
      message.tool_calls = step.calls.map((call, index) => ({
        id: call.id ?? `call_${id}_${index}`,
        type: 'function',
        function: { name: call.name, arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args) },
      }));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model: modelId,
        choices: [{ index: 0, message, finish_reason: step.kind === 'tool-calls' ? 'tool_calls' : 'stop' }],
        usage: usageBody(step.usage ?? DEFAULT_SCRIPTED_USAGE),
      }),
    );
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    get agentRequests() {
      return requests.filter((r) => !r.isTitleRequest);
    },
    enqueue: (...steps) => {
      queue.push(...steps);
    },
    setHandler: (next) => {
      handler = next;
    },
    waitForRequest: (predicate, timeoutMs = 120_000) => {
      const seen = requests.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          const index = waiters.findIndex((w) => w.resolve === wrapped);
          if (index >= 0) waiters.splice(index, 1);
          reject(new Error(`scripted model: no matching request within ${timeoutMs} ms (${requests.length} received)`));
        }, timeoutMs);
        const wrapped = (r: ScriptedRequest) => {
          clearTimeout(timer);
          resolve(r);
        };
        waiters.push({ predicate, resolve: wrapped });
      });
    },
    close: async () => {
      for (const res of openResponses) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function usageBody(usage: ScriptedUsage): Record<string, unknown> {
  return {
    prompt_tokens: usage.input,
    completion_tokens: usage.output,
    total_tokens: usage.input + usage.output,
    prompt_tokens_details: { cached_tokens: usage.cacheRead ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoning ?? 0 },
  };
}

function splitForStreaming(value: string): string[] {
  if (value.length === 0) return [];
  const size = Math.max(1, Math.ceil(value.length / 3));
  const pieces: string[] = [];
  for (let i = 0; i < value.length; i += size) pieces.push(value.slice(i, i + size));
  return pieces;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part === 'object' && 'text' in part ? String((part as { text: unknown }).text) : ''))
      .join('');
  }
  return '';
}

function describeRequest(index: number, req: IncomingMessage, body: Record<string, unknown>): ScriptedRequest {
  const messages = (Array.isArray(body.messages) ? body.messages : []) as ChatMessage[];
  const tools = (Array.isArray(body.tools) ? body.tools : []) as Array<{ function?: { name?: string } }>;
  const toolNames = tools.map((t) => t.function?.name ?? '').filter(Boolean);
  const system = messages
    .filter((m) => m.role === 'system')
    .map((m) => contentText(m.content))
    .join('\n\n');
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const lastAssistantIndex = messages.map((m) => m.role).lastIndexOf('assistant');
  const namesById = new Map<string, string>();
  for (const m of messages) for (const call of m.tool_calls ?? []) namesById.set(call.id, call.function.name);
  const toolResults: ToolResult[] = messages
    .slice(lastAssistantIndex + 1)
    .filter((m) => m.role === 'tool')
    .map((m) => ({ toolCallId: m.tool_call_id ?? '', name: namesById.get(m.tool_call_id ?? ''), content: contentText(m.content) }));
  const header = req.headers['x-session-id'];
  // opencode's title agent runs without tools and says so in its system prompt.
  const isTitleRequest = toolNames.length === 0 && /title/i.test(system) && !/forge/i.test(system);
  return {
    index,
    sessionId: Array.isArray(header) ? header[0] : header,
    headers: req.headers,
    body,
    model: String(body.model ?? ''),
    stream: body.stream === true,
    system,
    messages,
    toolNames,
    isTitleRequest,
    lastUserText: lastUser ? contentText(lastUser.content) : '',
    toolResults,
  };
}
