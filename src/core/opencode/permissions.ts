/**
 * Permissions for loop sessions (SPEC §2): a session never waits on a question. The ruleset is
 * given to opencode at `session.create` (opencode evaluates it after the agent's own rules;
 * the last matching rule wins), and `decidePermissionReply` answers any request that still
 * arrives (from a subagent session, or a default `ask` the ruleset did not cover).
 */
import { isAbsolute, relative, resolve } from 'node:path';
import type { PermissionReply, PermissionRequest, PermissionRule } from './agent-client';
import {
  FORGE_LOOP_CONTROL_TOOL_NAMES,
  FORGE_TOOL_NAMES,
  opencodeToolName,
  READ_ONLY_ROLES,
  roleMayUseTool,
  type ForgeAgentRole,
} from './forge-tools';

export type LoopRole = Exclude<ForgeAgentRole, 'architect' | 'splitter'>;

/**
 * The role a permission policy is for: a loop's coder or auditor, or the architect drafting a
 * plan (`forge plan`), which only reads: no shell at all, no file edits, no subagents.
 */
export type SessionRole = ForgeAgentRole;

export interface LoopPermissionOptions {
  role: SessionRole;
  /** Absolute path of the loop's worktree. */
  worktreeDir: string;
  /** The user's deny rules (settings, opencode config); rules that are not denies are ignored. */
  userDenyRules?: readonly PermissionRule[];
  /**
   * Folders outside the worktree that opencode itself uses and its defaults allow (its
   * tool-output folder, where it saves truncated tool output for the agent to read).
   */
  opencodeDirectories?: readonly string[];
  /**
   * Resolves symbolic links of a path (of its longest existing part, for a file about to be
   * made). opencode checks a file tool's path as text: a link in the worktree to a folder or
   * file outside (`ln -s /etc x`, `ln -s /proc/self/environ y` — opencode's own environment,
   * with its password) would pass. With this, Forge sees every file tool's request and refuses
   * one whose real path leaves the worktree. Injected so the decision stays pure.
   */
  realPath?: (path: string) => string;
  /**
   * Whether Forge's file tool guard runs in this session's opencode (file-guard-server.ts: its
   * plugin announced itself). When given and false, file tools are refused: their I/O would
   * happen on the host unchecked.
   */
  fileGuardActive?: () => boolean;
}

/** opencode permissions that file-editing tools (write, edit, patch, multiedit) ask for. */
const EDIT_PERMISSIONS = ['edit', 'write', 'patch', 'multiedit', 'apply_patch'];

/** Subagents an auditor may start: read-only exploration only (a general subagent could edit). */
const AUDITOR_SUBAGENTS = ['explore'];

/**
 * File tools whose path Forge checks through symbolic links: the ruleset makes opencode ask for
 * each (instead of allowing it by text), and `decidePermissionReply` resolves the real path.
 */
export const LINK_CHECKED_PERMISSIONS = ['read', 'edit', 'write', 'patch', 'multiedit', 'apply_patch', 'list'];

/** Permissions whose patterns are file paths (so they can be checked against the worktree). */
const PATH_PERMISSIONS = new Set(['read', 'edit', 'write', 'patch', 'multiedit', 'apply_patch', 'list', 'glob', 'grep', 'external_directory']);

export function structuralDenyRules(role: SessionRole): PermissionRule[] {
  const deny = (permission: string, pattern = '*'): PermissionRule => ({ permission, pattern, action: 'deny' });
  const rules: PermissionRule[] = [
    deny('bash', 'git push'),
    deny('bash', 'git push *'),
    deny('bash', '* && git push*'),
    deny('bash', '*; git push*'),
    deny('question'),
    ...FORGE_LOOP_CONTROL_TOOL_NAMES.map((tool) => deny(opencodeToolName(tool))),
    ...FORGE_TOOL_NAMES.filter((tool) => !roleMayUseTool(role, tool)).map((tool) => deny(opencodeToolName(tool))),
  ];
  if (role === 'auditor') {
    rules.push(...EDIT_PERMISSIONS.map((permission) => deny(permission)));
    rules.push(deny('task'), ...AUDITOR_SUBAGENTS.map((agent): PermissionRule => ({ permission: 'task', pattern: agent, action: 'allow' })));
  }
  if (READ_ONLY_ROLES.includes(role)) {
    // The architect and the feature splitter. Read-only by construction, not by prompt: every shell command is refused (a "read-only"
    // command list would leak: `git log --output=FILE`, `find -delete`, redirections), and so
    // is every file edit and every subagent (a general subagent could edit).
    rules.push(deny('bash'), ...EDIT_PERMISSIONS.map((permission) => deny(permission)), deny('task'));
  }
  return rules;
}

/**
 * Allow everything inside the worktree; deny leaving it; the user's deny rules; then Forge's
 * structural denies, last, so nothing before them can lift one.
 */
export function buildLoopPermissionRuleset(options: LoopPermissionOptions): PermissionRule[] {
  const worktree = resolve(options.worktreeDir);
  const base: PermissionRule[] = [
    { permission: '*', pattern: '*', action: 'allow' },
    { permission: 'external_directory', pattern: '*', action: 'deny' },
    { permission: 'external_directory', pattern: worktree, action: 'allow' },
    { permission: 'external_directory', pattern: `${worktree}/*`, action: 'allow' },
    ...(options.opencodeDirectories ?? []).flatMap((dir): PermissionRule[] => [
      { permission: 'external_directory', pattern: resolve(dir), action: 'allow' },
      { permission: 'external_directory', pattern: `${resolve(dir)}/*`, action: 'allow' },
    ]),
    // A model repeating the same call three times is stuck; a rejection tells it so, an ask would block.
    { permission: 'doom_loop', pattern: '*', action: 'deny' },
    // File tools come to Forge, which answers at once after following symbolic links.
    ...(options.realPath ? LINK_CHECKED_PERMISSIONS.map((permission): PermissionRule => ({ permission, pattern: '*', action: 'ask' })) : []),
  ];
  const userDenies = (options.userDenyRules ?? [])
    .filter((rule) => rule.action === 'deny' && rule.permission.length > 0 && rule.pattern.length > 0)
    .map((rule): PermissionRule => ({ permission: rule.permission, pattern: rule.pattern, action: 'deny' }));
  return [...base, ...userDenies, ...structuralDenyRules(options.role)];
}

/**
 * Deny rules of an opencode `permission` configuration value (`{ bash: "deny" }`,
 * `{ bash: { "rm *": "deny" } }`), so the user's own opencode denies survive the loop
 * ruleset's allow-all.
 */
export function denyRulesFromOpencodePermission(config: unknown): PermissionRule[] {
  if (!config || typeof config !== 'object') return [];
  const rules: PermissionRule[] = [];
  for (const [permission, value] of Object.entries(config as Record<string, unknown>)) {
    if (value === 'deny') rules.push({ permission, pattern: '*', action: 'deny' });
    else if (value && typeof value === 'object') {
      for (const [pattern, action] of Object.entries(value as Record<string, unknown>)) {
        if (action === 'deny') rules.push({ permission, pattern, action: 'deny' });
      }
    }
  }
  return rules;
}

/** opencode's wildcard: `*` any run of characters, `?` one character, everything else literal. */
export function wildcardMatch(value: string, pattern: string): boolean {
  let regex = '^';
  for (const ch of pattern) {
    if (ch === '*') regex += '[\\s\\S]*';
    else if (ch === '?') regex += '[\\s\\S]';
    else regex += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`${regex}$`).test(value);
}

/** Last matching rule wins; no match means opencode would ask. */
export function evaluateRuleset(ruleset: readonly PermissionRule[], permission: string, pattern: string): PermissionRule['action'] {
  let action: PermissionRule['action'] = 'ask';
  for (const rule of ruleset) {
    if (wildcardMatch(permission, rule.permission) && wildcardMatch(pattern, rule.pattern)) action = rule.action;
  }
  return action;
}

export function isInsideDirectory(directory: string, path: string): boolean {
  const base = resolve(directory);
  const target = isAbsolute(path) ? resolve(path) : resolve(base, path);
  const rel = relative(base, target);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

export interface PermissionDecision {
  reply: PermissionReply;
  /** Why, for the log and for the agent (sent as the rejection message). */
  reason: string;
}

/**
 * How Forge answers a permission request that reached it: reject what leaves the worktree or
 * what the structural ruleset denies, allow the rest once.
 */
export function decidePermissionReply(request: PermissionRequest, options: LoopPermissionOptions): PermissionDecision {
  const patterns = request.patterns.length > 0 ? request.patterns : ['*'];
  const structural = structuralDenyRules(options.role);
  for (const pattern of patterns) {
    if (evaluateRuleset(structural, request.permission, pattern) === 'deny') {
      const where = READ_ONLY_ROLES.includes(options.role) ? `the ${options.role} session (it only reads)` : `${options.role} loop sessions`;
      return { reply: 'reject', reason: `Forge does not allow "${request.permission}" (${pattern}) in ${where}.` };
    }
  }
  const userDenies = (options.userDenyRules ?? []).filter((r) => r.action === 'deny');
  for (const pattern of patterns) {
    if (evaluateRuleset(userDenies, request.permission, pattern) === 'deny') {
      return { reply: 'reject', reason: `Your configuration denies "${request.permission}" (${pattern}) in loop sessions.` };
    }
  }
  // The session ruleset's own denies (doom_loop, leaving the worktree) hold for subagents too.
  const ruleset = buildLoopPermissionRuleset(options);
  if (request.permission !== 'external_directory') {
    for (const pattern of patterns) {
      if (evaluateRuleset(ruleset, request.permission, pattern) === 'deny') {
        return { reply: 'reject', reason: `Forge's loop ruleset denies "${request.permission}" (${pattern}).` };
      }
    }
  }
  if (request.permission === 'external_directory' || PATH_PERMISSIONS.has(request.permission)) {
    // A bare `*` says nothing about the place, except for external_directory where it means "anywhere".
    const allowed = [options.worktreeDir, ...(options.opencodeDirectories ?? [])];
    const outside = patterns.filter((p) =>
      p === '*' ? request.permission === 'external_directory' : !allowed.some((dir) => isInsideDirectory(dir, stripGlob(p))),
    );
    if (outside.length > 0) {
      return { reply: 'reject', reason: `Loop sessions work only inside the worktree ${options.worktreeDir}; refused: ${outside.join(', ')}.` };
    }
  }
  // Issue 26: the worktree's `.git` (and any other repository's) is git's, never the agent's:
  // a rewritten `.git` file would point git (VS Code's, a user's) at a git dir of the agent's.
  if (GIT_GUARDED_PERMISSIONS.has(request.permission)) {
    const intoGit = patterns.filter((p) => p !== '*' && relative(options.worktreeDir, resolve(options.worktreeDir, stripGlob(p))).split(/[\\/]/).includes('.git'));
    if (intoGit.length > 0) return { reply: 'reject', reason: `Loop sessions do not write a .git file or folder (git's, not the agent's); refused: ${intoGit.join(', ')}.` };
  }
  if (options.fileGuardActive && LINK_CHECKED_PERMISSIONS.includes(request.permission) && !options.fileGuardActive()) {
    return { reply: 'reject', reason: "Forge's file tool guard is not active in this opencode server (its plugin did not load), so file tools are refused; restart the loop." };
  }
  if (options.realPath && LINK_CHECKED_PERMISSIONS.includes(request.permission)) {
    const real = (p: string) => options.realPath!(isAbsolute(p) ? p : resolve(options.worktreeDir, p));
    const allowedReal = [options.worktreeDir, ...(options.opencodeDirectories ?? [])].map((dir) => real(dir));
    const linked = patterns.filter((p) => p !== '*' && !allowedReal.some((dir) => isInsideDirectory(dir, real(stripGlob(p)))));
    if (linked.length > 0) {
      return {
        reply: 'reject',
        reason: `Loop sessions work only inside the worktree ${options.worktreeDir}; refused (a symbolic link leads outside it): ${linked.map((p) => `${p} → ${real(stripGlob(p))}`).join(', ')}.`,
      };
    }
  }
  return { reply: 'once', reason: `allowed once inside the worktree (${request.permission}: ${patterns.join(', ')})` };
}

/** Permissions that write files: none may touch a `.git` entry. */
const GIT_GUARDED_PERMISSIONS = new Set(['edit', 'write', 'patch', 'multiedit', 'apply_patch']);

function stripGlob(pattern: string): string {
  const star = pattern.search(/[*?]/);
  const head = star >= 0 ? pattern.slice(0, star) : pattern;
  return head.replace(/\/+$/, '') || '/';
}
