/**
 * Forge's layer of opencode configuration, passed inline (`OPENCODE_CONFIG_CONTENT`) so no file
 * is written into the user's repository or worktree.
 *
 * How it merges (opencode 1.18, seen in its config loader and checked in the tests): global
 * config (`$XDG_CONFIG_HOME/opencode/opencode.json[c]`) → `OPENCODE_CONFIG` (a path, honoured
 * from the user's environment) → the project's `opencode.json[c]` → `.opencode/` folders →
 * `OPENCODE_CONFIG_CONTENT` → managed config. Forge-run instances skip the project's files and
 * folders (`OPENCODE_DISABLE_PROJECT_CONFIG`, see project-config.ts): the user's project model
 * and provider settings arrive in this layer instead. Objects merge deeply, later wins; `instructions`
 * concatenate. So Forge's agents, its MCP server and its `question: deny` win over same-named
 * keys of the user, and everything else of the user (providers, credentials, other agents,
 * plugins, instructions) stays in effect.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OpencodeRemoteMcpEntry } from './forge-tool-server';
import { deepMerge } from './server-process';
import {
  FORGE_AGENT_NAMES,
  FORGE_AGENT_ROLES,
  FORGE_MCP_SERVER_NAME,
  FORGE_TOOL_NAMES,
  opencodeToolName,
  READ_ONLY_ROLES,
  roleMayUseTool,
  type ForgeAgentRole,
} from './forge-tools';

export type AgentPrompts = Record<ForgeAgentRole, string>;

/** Loads `forge-code.md`, `forge-auditor.md`, `forge-architect.md`, `forge-splitter.md` from the folder the caller ships them in. */
export async function loadAgentPrompts(folder: string): Promise<AgentPrompts> {
  const prompts = {} as AgentPrompts;
  for (const role of FORGE_AGENT_ROLES) {
    const file = join(folder, `${FORGE_AGENT_NAMES[role]}.md`);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      throw new Error(`Forge could not read the ${role} agent prompt ${file}: ${(error as Error).message}. Reinstall Forge or restore the file.`);
    }
    if (!text.trim()) throw new Error(`The ${role} agent prompt ${file} is empty.`);
    prompts[role] = text.trim();
  }
  return prompts;
}

export interface ForgeOpencodeConfigInput {
  prompts: AgentPrompts;
  /**
   * `scope.mcpEntry` of the Forge tool server scope this opencode server works for; absent for a
   * server shared by several loops, whose instances get their loop's entry at run time.
   */
  toolServer?: OpencodeRemoteMcpEntry;
  /** Per-role model as "provider/model"; omitted roles use the user's default model. */
  models?: Partial<Record<ForgeAgentRole, string>>;
  /**
   * The model and provider settings of the user's project configuration (project-config.ts),
   * merged under Forge's layer: opencode itself reads no configuration from a loop's worktree.
   */
  projectLayer?: Record<string, unknown>;
  /** `file://` URL of Forge's file tool guard plugin (file-guard-server.ts). */
  fileGuardPlugin?: string;
}

const DESCRIPTIONS: Record<ForgeAgentRole, string> = {
  code: "Forge's coding agent: implements a plan section in the loop's worktree and hands off.",
  auditor: "Forge's auditor: reviews the loop's work against the plan and records findings. Cannot edit files.",
  architect: "Forge's architect: a read-only planner that writes the plan of record.",
  splitter: "Forge's feature splitter: reads a PRD and the repository, and writes one plan per feature.",
};

/**
 * Agent-level permissions: only specific denies here (an agent-level `*` allow can end up after
 * a deny and win). The per-session ruleset adds the rest at `session.create`.
 */
export function agentPermission(role: ForgeAgentRole): Record<string, unknown> {
  const permission: Record<string, unknown> = {};
  for (const tool of FORGE_TOOL_NAMES) {
    if (!roleMayUseTool(role, tool)) permission[opencodeToolName(tool)] = 'deny';
  }
  if (role === 'auditor' || READ_ONLY_ROLES.includes(role)) permission.edit = 'deny';
  if (READ_ONLY_ROLES.includes(role)) permission.bash = 'deny';
  return permission;
}

export function buildForgeOpencodeConfig(input: ForgeOpencodeConfigInput): Record<string, unknown> {
  const agent: Record<string, unknown> = {};
  for (const role of FORGE_AGENT_ROLES) {
    const entry: Record<string, unknown> = {
      description: DESCRIPTIONS[role],
      mode: 'primary',
      prompt: input.prompts[role],
      permission: agentPermission(role),
    };
    const model = input.models?.[role];
    if (model) entry.model = model;
    agent[FORGE_AGENT_NAMES[role]] = entry;
  }
  const forge = {
    ...(input.toolServer ? { mcp: { [FORGE_MCP_SERVER_NAME]: input.toolServer } } : {}),
    ...(input.fileGuardPlugin ? { plugin: [input.fileGuardPlugin] } : {}),
    agent,
    // Nobody answers questions in a Forge-run server; subagents inherit this too.
    permission: { question: 'deny' },
    // opencode's undo snapshots track the worktree in a shadow git repository before and after
    // every step (a `git add` of the whole tree each time). Forge's checkpoint commits on the
    // loop branch already record the agent's work, and nobody reverts a Forge session from
    // opencode's UI, so the shadow repository is only cost (and disk outside the data folder).
    snapshot: false,
    // Both start programs on the host for files the agent wrote (a formatter after every edit,
    // `prettier` when the worktree's package.json names it; language servers from its
    // node_modules): never for a Forge-run instance, whatever the user's configuration says.
    formatter: false,
    lsp: false,
  };
  return input.projectLayer ? deepMerge(input.projectLayer, forge) : forge;
}
