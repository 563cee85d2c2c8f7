/**
 * Forge's agent tools served over MCP (Streamable HTTP, stateless) on 127.0.0.1, registered in
 * opencode's configuration as the remote MCP server `forge`.
 *
 * Who is calling. opencode tells an MCP server nothing about the calling session or agent: the
 * requests carry only the headers configured for the server entry, and `tools/call` carries
 * only `_meta.progressToken` (seen with opencode 1.18.33, see the tests). The headers are fixed
 * per opencode process, because the configuration is. So Forge runs one opencode server per
 * loop and gives each loop its own *scope*: the scope's id is part of the MCP URL in that
 * server's configuration, which makes every call carry its loop. The role is the role of the
 * loop's current session, which the runtime registers with `scope.setActiveSession()` — sound
 * because the runtime runs one session at a time per loop and aborts a session before it
 * rotates to the next. A planning (architect) scope has a fixed role instead.
 * Defence in depth: each agent's permission ruleset also denies the Forge tools its role may not
 * call, so opencode does not even offer them to the model; the role check here is what holds
 * when a call arrives anyway.
 *
 * Who may call at all: a secret generated per tool server (per Forge run), sent by opencode as a
 * bearer header from the MCP entry; anything else gets 401. Scope ids are random too.
 */
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ForgeToolError, type ForgeToolBackend, type ForgeToolCaller } from './forge-tool-backend';
import {
  FORGE_TOOLS,
  FORGE_TOOL_NAMES,
  TOOLS_BY_ROLE,
  roleMayUseTool,
  type ForgeAgentRole,
  type ForgeToolName,
} from './forge-tools';

/** A remote MCP entry in opencode's configuration (`mcp.<name>`). */
export interface OpencodeRemoteMcpEntry {
  type: 'remote';
  url: string;
  headers: Record<string, string>;
  oauth: false;
  enabled: true;
  /** Milliseconds opencode waits for the tool list. */
  timeout: number;
}

export interface ForgeToolCallLogEntry {
  scopeId: string;
  loopName: string | null;
  role: ForgeAgentRole | undefined;
  sessionId: string | undefined;
  tool: string;
  outcome: 'ok' | 'refused' | 'invalid' | 'failed';
  message?: string;
}

export interface ForgeToolServerOptions {
  backend: ForgeToolBackend;
  /** Fixed port (tests); default: a free port. */
  port?: number;
  /** Per-run secret; default: 32 random bytes. */
  secret?: string;
  onCall?: (entry: ForgeToolCallLogEntry) => void;
  onError?: (error: unknown) => void;
}

export interface ActiveAgentSession {
  sessionId: string;
  role: ForgeAgentRole;
}

export interface ForgeToolScope {
  readonly id: string;
  readonly loopName: string | null;
  /** What to put under `mcp.forge` in the opencode configuration of this scope's server. */
  readonly mcpEntry: OpencodeRemoteMcpEntry;
  /** The loop's current session and its role; undefined between sessions (calls are refused). */
  setActiveSession(session: ActiveAgentSession | undefined): void;
  activeSession(): ActiveAgentSession | undefined;
  close(): void;
}

export interface OpenScopeInput {
  loopName: string | null;
  /** Fixed role for scopes without sessions to track (planning). */
  role?: ForgeAgentRole;
  scopeKey?: string;
}

export interface ForgeToolServer {
  /** Base URL, `http://127.0.0.1:PORT`. */
  readonly url: string;
  openScope(input: OpenScopeInput): ForgeToolScope;
  close(): Promise<void>;
}

/** What opencode waits for a Forge tool call: forge_shell's longest wait (600 s) plus headroom. */
export const MCP_REQUEST_TIMEOUT_MS = 630_000;

const BACKEND_METHOD: Record<ForgeToolName, keyof ForgeToolBackend> = {
  review_write: 'reviewWrite',
  review_read: 'reviewRead',
  review_delete: 'reviewDelete',
  review_reply: 'reviewReply',
  plan_read: 'planRead',
  plan_write: 'planWrite',
  plan_edit: 'planEdit',
  section_read: 'sectionRead',
  plan_adjust: 'planAdjust',
  loop_handoff: 'loopHandoff',
  shell: 'shell',
  jobs: 'jobs',
  features_write: 'featuresWrite',
};

interface ScopeState {
  id: string;
  loopName: string | null;
  fixedRole: ForgeAgentRole | undefined;
  scopeKey: string | undefined;
  active: ActiveAgentSession | undefined;
  closed: boolean;
}

export async function startForgeToolServer(options: ForgeToolServerOptions): Promise<ForgeToolServer> {
  const secret = options.secret ?? randomBytes(32).toString('base64url');
  const expectedAuth = Buffer.from(`Bearer ${secret}`);
  const scopes = new Map<string, ScopeState>();
  const report = options.onCall ?? (() => {});
  const reportError = options.onError ?? (() => {});

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      reportError(error);
      if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Forge tool server: internal error');
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const match = /^\/mcp\/([A-Za-z0-9_-]+)\/?$/.exec((req.url ?? '').split('?')[0] ?? '');
    if (!authorized(req)) {
      jsonRpcError(res, 401, -32001, 'Forge tool server: missing or wrong secret.');
      return;
    }
    const scope = match ? scopes.get(match[1] ?? '') : undefined;
    if (!scope || scope.closed) {
      jsonRpcError(res, 404, -32002, 'Forge tool server: unknown or closed scope (the loop this opencode server belonged to has ended).');
      return;
    }
    if (req.method !== 'POST') {
      // Stateless server: no standalone SSE stream, no sessions to delete.
      res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null }));
      return;
    }
    const body = await readJson(req);
    if (body === INVALID_JSON) {
      jsonRpcError(res, 400, -32700, 'Forge tool server: the request body is not JSON.');
      return;
    }
    const mcp = buildMcpServer(scope);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  function authorized(req: IncomingMessage): boolean {
    const given = Buffer.from(String(req.headers.authorization ?? ''));
    return given.length === expectedAuth.length && timingSafeEqual(given, expectedAuth);
  }

  function buildMcpServer(scope: ScopeState): McpServer {
    // The low-level server, so the role check comes before argument validation and refusals
    // read the same whatever the arguments were.
    const mcp = new McpServer({ name: 'forge', version: '1' }, { capabilities: { tools: {} } });
    mcp.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOL_LIST }));
    mcp.setRequestHandler(CallToolRequestSchema, async (request) => {
      const name = request.params.name;
      if (!(FORGE_TOOL_NAMES as readonly string[]).includes(name)) {
        return toolError(`Forge has no tool "${name}". Forge tools: ${FORGE_TOOL_NAMES.join(', ')}.`);
      }
      return runTool(scope, name as ForgeToolName, request.params.arguments);
    });
    return mcp;
  }

  async function runTool(scope: ScopeState, tool: ForgeToolName, args: unknown): Promise<CallToolResult> {
    const active = scope.fixedRole ? { role: scope.fixedRole, sessionId: scope.active?.sessionId } : scope.active;
    const base = { scopeId: scope.id, loopName: scope.loopName, role: active?.role, sessionId: active?.sessionId, tool };
    if (!active) {
      const message = `Forge refused ${tool}: no agent session of loop "${scope.loopName ?? '?'}" is active right now, so Forge cannot tell which role is calling.`;
      report({ ...base, outcome: 'refused', message });
      return toolError(message);
    }
    if (!roleMayUseTool(active.role, tool)) {
      const message = `Forge refused ${tool}: the ${active.role} agent may not call it. Tools available to the ${active.role} agent: ${TOOLS_BY_ROLE[active.role].join(', ')}.`;
      report({ ...base, outcome: 'refused', message });
      return toolError(message);
    }
    const parsed = FORGE_TOOLS[tool].args.safeParse(args ?? {});
    if (!parsed.success) {
      const message = `Invalid arguments for ${tool}: ${formatIssues(parsed.error.issues)}`;
      report({ ...base, outcome: 'invalid', message });
      return toolError(message);
    }
    const caller: ForgeToolCaller = { loopName: scope.loopName, role: active.role, sessionId: active.sessionId };
    if (scope.scopeKey !== undefined) caller.scopeKey = scope.scopeKey;
    try {
      const method = options.backend[BACKEND_METHOD[tool]] as (c: ForgeToolCaller, a: unknown) => Promise<string>;
      const text = await method.call(options.backend, caller, parsed.data);
      report({ ...base, outcome: 'ok' });
      return { content: [{ type: 'text', text }] };
    } catch (error) {
      if (error instanceof ForgeToolError) {
        report({ ...base, outcome: 'refused', message: error.message });
        return toolError(error.message);
      }
      reportError(error);
      const message = `Forge could not run ${tool}: ${error instanceof Error ? error.message : String(error)}`;
      report({ ...base, outcome: 'failed', message });
      return toolError(message);
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    openScope(input) {
      const state: ScopeState = {
        id: randomUUID().replace(/-/g, ''),
        loopName: input.loopName,
        fixedRole: input.role,
        scopeKey: input.scopeKey,
        active: undefined,
        closed: false,
      };
      scopes.set(state.id, state);
      return {
        id: state.id,
        loopName: state.loopName,
        mcpEntry: {
          type: 'remote',
          url: `${url}/mcp/${state.id}`,
          headers: { Authorization: `Bearer ${secret}` },
          oauth: false,
          enabled: true,
          // opencode applies this to tool calls too: forge_shell may wait up to max_wait_ms (600 s).
          timeout: MCP_REQUEST_TIMEOUT_MS,
        },
        setActiveSession(session) {
          state.active = session ? { ...session } : undefined;
        },
        activeSession: () => (state.active ? { ...state.active } : undefined),
        close() {
          state.closed = true;
          scopes.delete(state.id);
        },
      };
    },
    async close() {
      scopes.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function formatIssues(issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string {
  return issues.map((issue) => (issue.path.length ? `${issue.path.map(String).join('.')}: ${issue.message}` : issue.message)).join('; ');
}

const TOOL_LIST: Tool[] = FORGE_TOOL_NAMES.map((name) => {
  const { $schema: _ignored, ...inputSchema } = z.toJSONSchema(FORGE_TOOLS[name].args, { io: 'input' }) as Record<string, unknown>;
  return { name, description: FORGE_TOOLS[name].description, inputSchema: { ...inputSchema, type: 'object' } as Tool['inputSchema'] };
});

function toolError(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

const INVALID_JSON = Symbol('invalid-json');

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  if (raw.trim() === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return INVALID_JSON;
  }
}
