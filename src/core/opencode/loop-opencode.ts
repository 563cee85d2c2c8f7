/**
 * Everything a loop needs from opencode, wired: a Forge tool scope for the loop, Forge's
 * configuration layer pointing at it, a supervised `opencode serve` in the worktree (or an
 * attached user server), and an `AgentClient` on it.
 *
 * One opencode server per loop: opencode cannot tell an MCP server which session calls it, and
 * its configuration (where the MCP URL lives) is per process, so a per-loop server is what
 * makes every Forge tool call carry its loop (see `forge-tool-server.ts`).
 */
import type { AgentClient } from './agent-client';
import { buildForgeOpencodeConfig, type AgentPrompts } from './forge-config';
import type { ForgeToolScope, ForgeToolServer, OpenScopeInput } from './forge-tool-server';
import { FORGE_AGENT_NAMES, FORGE_AGENT_ROLES, FORGE_MCP_SERVER_NAME, type ForgeAgentRole } from './forge-tools';
import { addRemoteMcpServer, createSdkAgentClient } from './sdk-agent-client';
import type { PermissionRule } from './agent-client';
import { realPathThroughLinks } from '../fs/real-path';
import { buildLoopPermissionRuleset, type LoopPermissionOptions, type SessionRole } from './permissions';
import { opencodeOwnDirectories, resolveOpencodeBinary, type OpencodeEndpoint } from './server-process';
import {
  attachOpencodeServer,
  startSupervisedOpencode,
  type OpencodeServerHandle,
  type OpencodeServerListener,
  type RestartPolicy,
} from './server-supervisor';
import { keepOpencodeWritesOutOfWorktree } from './worktree-guard';

export interface LoopOpencodeOptions {
  loopName: string;
  /** The Forge tool scope to open, when not the loop's (an architect's planning scope). */
  toolScope?: OpenScopeInput;
  worktreeDir: string;
  toolServer: ForgeToolServer;
  prompts: AgentPrompts;
  models?: Partial<Record<ForgeAgentRole, string>>;
  /** Setting `forge.opencode.binaryPath`. */
  binaryPath?: string;
  /** Setting `forge.opencode.serverUrl`: attach instead of starting a server. */
  attach?: OpencodeEndpoint;
  /** The user's environment (default `process.env`). */
  baseEnv?: NodeJS.ProcessEnv;
  extraEnv?: Record<string, string>;
  restart?: Partial<RestartPolicy>;
  startTimeoutMs?: number;
  onServerEvent?: OpencodeServerListener;
  onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
  log?: (message: string) => void;
}

export interface LoopOpencode {
  server: OpencodeServerHandle;
  client: AgentClient;
  scope: ForgeToolScope;
  /**
   * Whether opencode knows Forge's agents. Always true for a server Forge starts; an attached
   * server may lack them, and then prompts must carry the agent prompt as `system`.
   */
  agentsConfigured: boolean;
  /** Permission policy of a loop session of `role` (for `attachPermissionResponder`). */
  permissionOptions(role: SessionRole, userDenyRules?: readonly PermissionRule[]): LoopPermissionOptions;
  /** The ruleset to pass at `createSession` for a loop session of `role`. */
  permissionRuleset(role: SessionRole, userDenyRules?: readonly PermissionRule[]): PermissionRule[];
  stop(): Promise<void>;
}

export async function startLoopOpencode(options: LoopOpencodeOptions): Promise<LoopOpencode> {
  const scope = options.toolServer.openScope(options.toolScope ?? { loopName: options.loopName });
  const forgeConfig = buildForgeOpencodeConfig({ prompts: options.prompts, toolServer: scope.mcpEntry, models: options.models });
  let server: OpencodeServerHandle | undefined;
  try {
    if (options.attach) {
      server = await attachOpencodeServer(options.attach);
      await addRemoteMcpServer(server, options.worktreeDir, FORGE_MCP_SERVER_NAME, scope.mcpEntry);
    } else {
      const binaryPath = resolveOpencodeBinary({ configuredPath: options.binaryPath || undefined });
      await keepOpencodeWritesOutOfWorktree(options.worktreeDir);
      server = await startSupervisedOpencode({
        binaryPath,
        cwd: options.worktreeDir,
        baseEnv: options.baseEnv,
        extraEnv: options.extraEnv,
        forgeConfig,
        startTimeoutMs: options.startTimeoutMs,
        restart: options.restart,
        onOutput: options.onOutput,
      });
    }
  } catch (error) {
    scope.close();
    throw error;
  }
  const detach = options.onServerEvent ? server.onEvent(options.onServerEvent) : () => {};
  const client = createSdkAgentClient({ server, directory: options.worktreeDir, log: options.log });
  let agentsConfigured = true;
  if (options.attach) {
    const known = new Set(await client.agents());
    agentsConfigured = FORGE_AGENT_ROLES.every((role) => known.has(FORGE_AGENT_NAMES[role]));
  }
  const running = server;
  const opencodeDirectories = options.attach ? [] : opencodeOwnDirectories({ ...(options.baseEnv ?? process.env), ...(options.extraEnv ?? {}) });
  const permissionOptions = (role: SessionRole, userDenyRules?: readonly PermissionRule[]): LoopPermissionOptions => ({
    role,
    worktreeDir: options.worktreeDir,
    opencodeDirectories,
    realPath: realPathThroughLinks,
    ...(userDenyRules ? { userDenyRules } : {}),
  });
  return {
    permissionOptions,
    permissionRuleset: (role, userDenyRules) => buildLoopPermissionRuleset(permissionOptions(role, userDenyRules)),
    server: running,
    client,
    scope,
    agentsConfigured,
    async stop() {
      await client.close();
      detach();
      await running.stop();
      scope.close();
    },
  };
}
