/**
 * Everything a loop needs from opencode, wired: a Forge tool scope for the loop, Forge's
 * configuration layer pointing at it, a supervised `opencode serve` in the worktree (or an
 * attached user server), and an `AgentClient` on it.
 *
 * Two ways to serve a loop. With `shared`, the loop joins a server shared with the other loops
 * of this Forge process (shared-opencode.ts: the loop's tools are added to its worktree's
 * instance, its shell is routed by directory). Without, the loop gets a server of its own whose
 * configuration names the loop's tool scope (what every Forge tool call carries its loop by,
 * see `forge-tool-server.ts`) and the loop's shell.
 */
import type { AgentClient } from './agent-client';
import { buildForgeOpencodeConfig, type AgentPrompts } from './forge-config';
import type { ForgeToolScope, ForgeToolServer, OpenScopeInput } from './forge-tool-server';
import { FORGE_AGENT_NAMES, FORGE_AGENT_ROLES, FORGE_MCP_SERVER_NAME, type ForgeAgentRole } from './forge-tools';
import { addRemoteMcpServer, createSdkAgentClient } from './sdk-agent-client';
import type { PermissionRule } from './agent-client';
import { realPathThroughLinks } from '../fs/real-path';
import { buildLoopPermissionRuleset, type LoopPermissionOptions, type SessionRole } from './permissions';
import { opencodeOwnDirectories, resolveOpencodeBinary, startOpencodeProcess, type OpencodeEndpoint } from './server-process';
import {
  attachOpencodeServer,
  startSupervisedOpencode,
  type OpencodeServerHandle,
  type OpencodeServerListener,
  type RestartPolicy,
} from './server-supervisor';
import { keepOpencodeWritesOutOfWorktree } from './worktree-guard';
import { disableWorktreePluginCode, NO_PROJECT_CONFIG_ENVIRONMENT } from './project-config';
import type { SharedOpencodePool, SharedServerConfinement } from './shared-opencode';
import type { FileGuardServer } from './file-guard-server';

export interface LoopOpencodeOptions {
  loopName: string;
  /** The Forge tool scope to open, when not the loop's (an architect's planning scope). */
  toolScope?: OpenScopeInput;
  worktreeDir: string;
  toolServer: ForgeToolServer;
  prompts: AgentPrompts;
  models?: Partial<Record<ForgeAgentRole, string>>;
  /**
   * The user's project configuration as loops use it (`projectLayerFor`): opencode reads none
   * from the worktree, which the agent writes (ignored with `attach`).
   */
  projectLayer?: Record<string, unknown>;
  /**
   * The user's checkout the worktree came from: plugin code in the worktree that is not the
   * same there is disabled before opencode starts an instance for the worktree
   * (`disableWorktreePluginCode`); absent, all of it is.
   */
  userCheckoutDir?: string;
  /** Told the worktree files Forge disabled that way (for a notice). */
  onDisabledPluginCode?: (names: string[]) => void;
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
  /** Join a server shared by the loops of this process instead of starting one (ignored with `attach`). */
  shared?: {
    pool: SharedOpencodePool;
    confinement: SharedServerConfinement;
    /** The loop's own shell (and ripgrep shim), which the shared server's router runs its commands through. */
    shell?: { shellPath: string; ripgrepPath?: string };
  };
  onOutput?: (line: string, stream: 'stdout' | 'stderr') => void;
  log?: (message: string) => void;
  /** Forge's file tool guard (a server Forge starts; an attached server cannot load it) and the loop's sandbox freezer. */
  fileGuard?: { server: FileGuardServer; freeze?: () => Promise<(() => Promise<void>) | null> };
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
  /** The server is shared with other loops: what the loop's agent starts carries this FORGE_LOOP_INSTANCE marker. */
  sharedLoopMarker?: string;
  /** Permission policy of a loop session of `role` (for `attachPermissionResponder`). */
  permissionOptions(role: SessionRole, userDenyRules?: readonly PermissionRule[]): LoopPermissionOptions;
  /** The ruleset to pass at `createSession` for a loop session of `role`. */
  permissionRuleset(role: SessionRole, userDenyRules?: readonly PermissionRule[]): PermissionRule[];
  stop(): Promise<void>;
}

export async function startLoopOpencode(options: LoopOpencodeOptions): Promise<LoopOpencode> {
  const scope = options.toolServer.openScope(options.toolScope ?? { loopName: options.loopName });
  const fileGuardPlugin = options.attach ? undefined : options.fileGuard?.server.pluginUrl;
  // Registered before opencode can run a single tool in the worktree.
  const unguard =
    options.fileGuard && !options.attach
      ? options.fileGuard.server.guard.register({
          worktreeDir: options.worktreeDir,
          allowedDirs: opencodeOwnDirectories({ ...(options.baseEnv ?? process.env), ...(options.extraEnv ?? {}) }),
          ...(options.fileGuard.freeze ? { freeze: options.fileGuard.freeze } : {}),
        })
      : () => {};
  let server: OpencodeServerHandle | undefined;
  let leaveShared: (() => Promise<void>) | undefined;
  let sharedLoopMarker: string | undefined;
  try {
    if (options.attach) {
      server = await attachOpencodeServer(options.attach);
      await addRemoteMcpServer(await server.waitForEndpoint(), options.worktreeDir, FORGE_MCP_SERVER_NAME, scope.mcpEntry);
    } else {
      const binaryPath = resolveOpencodeBinary({ configuredPath: options.binaryPath || undefined });
      await keepOpencodeWritesOutOfWorktree(options.worktreeDir);
      // Over the user's and the caller's environment: no configuration, plugin, tool, agent,
      // command, MCP server or AGENTS.md from the worktree (project-config.ts).
      const extraEnv = { ...(options.extraEnv ?? {}), ...NO_PROJECT_CONFIG_ENVIRONMENT };
      const projectLayer = options.projectLayer ? { projectLayer: options.projectLayer } : {};
      const beforeInstance = async () => {
        const disabled = await disableWorktreePluginCode(options.worktreeDir, options.userCheckoutDir);
        if (disabled.length > 0) options.onDisabledPluginCode?.(disabled);
      };
      if (options.shared) {
        const membership = await options.shared.pool.join(
          {
            binaryPath,
            confinement: options.shared.confinement,
            baseEnv: options.baseEnv ?? process.env,
            extraEnv,
            // No tool scope and no models: each loop's instance gets its scope, each prompt its model.
            forgeConfig: buildForgeOpencodeConfig({ prompts: options.prompts, ...projectLayer, ...(fileGuardPlugin ? { fileGuardPlugin } : {}) }),
            ...(options.startTimeoutMs !== undefined ? { startTimeoutMs: options.startTimeoutMs } : {}),
            ...(options.restart ? { restart: options.restart } : {}),
            ...(options.onOutput ? { onOutput: options.onOutput } : {}),
          },
          {
            loopName: options.loopName,
            worktreeDir: options.worktreeDir,
            mcpEntry: scope.mcpEntry,
            beforeInstance,
            ...(options.shared.shell ? { shell: options.shared.shell } : {}),
            ...(options.log ? { log: options.log } : {}),
          },
        );
        server = membership.server;
        leaveShared = membership.leave;
        sharedLoopMarker = membership.loopMarker;
      } else {
        server = await startSupervisedOpencode({
          // Every start (the first, each restart) loads the worktree's instance: guard it first.
          start: async (processOptions) => {
            await beforeInstance();
            return startOpencodeProcess(processOptions);
          },
          binaryPath,
          cwd: options.worktreeDir,
          baseEnv: options.baseEnv,
          extraEnv,
          forgeConfig: buildForgeOpencodeConfig({ prompts: options.prompts, toolServer: scope.mcpEntry, models: options.models, ...projectLayer, ...(fileGuardPlugin ? { fileGuardPlugin } : {}) }),
          startTimeoutMs: options.startTimeoutMs,
          restart: options.restart,
          onOutput: options.onOutput,
        });
      }
    }
  } catch (error) {
    unguard();
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
    ...(options.fileGuard && !options.attach ? { fileGuardActive: () => options.fileGuard!.server.guard.active(options.worktreeDir) } : {}),
  });
  return {
    permissionOptions,
    permissionRuleset: (role, userDenyRules) => buildLoopPermissionRuleset(permissionOptions(role, userDenyRules)),
    server: running,
    client,
    scope,
    agentsConfigured,
    ...(sharedLoopMarker ? { sharedLoopMarker } : {}),
    async stop() {
      await client.close();
      detach();
      if (leaveShared) await leaveShared();
      else await running.stop();
      unguard();
      scope.close();
    },
  };
}
