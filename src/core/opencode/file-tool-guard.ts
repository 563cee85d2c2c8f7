/**
 * opencode's file tools (read, write, edit, apply_patch, …) run on the host, in the opencode
 * server, and open their paths themselves, some of them (edit, write, apply_patch) before they
 * even ask for permission. A job in the sandbox could swap a worktree folder for a link to a host
 * folder between any check of Forge and that I/O. So Forge checks every file tool call right
 * before it runs (opencode's `tool.execute.before` plugin hook, see file-guard-server.ts) with
 * the loop's sandbox FROZEN, and keeps it frozen until the call has finished: the path checked
 * is the path used, because nothing that could change it runs in between.
 *
 * This file is the pure part: which paths a tool call touches, and whether they stay inside.
 */
import { isAbsolute, resolve } from 'node:path';
import { isInsideDirectory } from './permissions';

/** Tools whose I/O is not opencode's own file access on the host (or runs in the sandbox, or is Forge's). */
const NOT_FILE_TOOLS = new Set(['bash', 'task', 'webfetch', 'websearch', 'codesearch', 'todowrite', 'todoread', 'question', 'skill', 'invalid', 'batch']);

/** Argument names a file path travels in, in opencode's tools. */
const PATH_ARGS = ['filePath', 'file_path', 'path'];

/** Whether Forge must check (and freeze the sandbox for) this tool; bash must never be frozen against itself. */
export function isFileTool(tool: string, args: Record<string, unknown>): boolean {
  if (NOT_FILE_TOOLS.has(tool) || tool.startsWith('forge_')) return false;
  if (['read', 'write', 'edit', 'multiedit', 'apply_patch', 'patch', 'glob', 'grep', 'list', 'lsp'].includes(tool)) return true;
  // An unknown tool (a newer opencode's, a plugin's) that names a path is handled as a file tool.
  return PATH_ARGS.some((name) => typeof args[name] === 'string') || typeof args.patchText === 'string';
}

/**
 * Search tools run ripgrep through the loop's shim, inside the sandbox, where the host is not
 * visible (shell-shim.ts): freezing the sandbox for them would freeze their own search. Their
 * paths are still checked; every other file tool runs with the sandbox frozen.
 */
export function runsInSandbox(tool: string): boolean {
  return tool === 'glob' || tool === 'grep' || tool === 'list';
}

/** Paths named by `*** Add/Update/Delete File:` and `*** Move to:` lines of an apply_patch text. */
export function patchTargets(patchText: string): string[] {
  const paths: string[] = [];
  for (const line of patchText.split(/\r?\n/)) {
    const m = /^\*\*\* (?:(?:Add|Update|Delete) File|Move to):\s*(.+?)\s*$/.exec(line);
    if (m) paths.push(m[1]!);
  }
  return paths;
}

/** The absolute paths a file tool call touches (search tools: their folder, by default `directory`). */
export function fileToolTargets(tool: string, args: Record<string, unknown>, directory: string): string[] {
  const named: string[] = [];
  for (const name of PATH_ARGS) if (typeof args[name] === 'string' && args[name]) named.push(args[name] as string);
  if (typeof args.patchText === 'string') named.push(...patchTargets(args.patchText));
  if (named.length === 0) named.push(directory);
  return named.map((p) => (isAbsolute(p) ? resolve(p) : resolve(directory, p)));
}

export interface FileToolPolicy {
  worktreeDir: string;
  /** opencode's own folders it may read (its tool-output folder). */
  allowedDirs: readonly string[];
  /** Resolves every symbolic link of a path (realPathThroughLinks), injected to keep this pure. */
  realPath: (path: string) => string;
}

export type FileToolDecision = { allow: true } | { allow: false; reason: string };

/** Allowed when every path the call touches is, with all links followed, inside the worktree (or an opencode folder). */
export function decideFileToolCall(tool: string, args: Record<string, unknown>, directory: string, policy: FileToolPolicy): FileToolDecision {
  const roots = [policy.worktreeDir, ...policy.allowedDirs];
  const realRoots = roots.map((dir) => policy.realPath(dir));
  const refused: string[] = [];
  for (const target of fileToolTargets(tool, args, directory)) {
    const real = policy.realPath(target);
    // Where the I/O really lands, every link followed (a path spelled through a link into the worktree is fine).
    if (!realRoots.some((dir) => isInsideDirectory(dir, real))) {
      refused.push(real === target ? target : `${target} → ${real}`);
    }
  }
  if (refused.length === 0) return { allow: true };
  return {
    allow: false,
    reason: `Forge refused ${tool}: loop sessions work only inside the worktree ${policy.worktreeDir}, and this leaves it (symbolic links followed): ${refused.join(', ')}.`,
  };
}
