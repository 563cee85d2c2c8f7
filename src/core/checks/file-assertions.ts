/**
 * File assertions (`exists`, `contains`, `matches`), evaluated in Node on the worktree's real
 * files: the path is resolved inside the worktree and symbolic links are followed; a path whose
 * real location leaves the worktree is refused, whatever it points at.
 */
import { existsSync, promises as fs } from 'node:fs';
import { isAbsolute, join, relative, sep } from 'node:path';
import { runInNewContext } from 'node:vm';
import { realPathThroughLinks } from '../fs/real-path';
import type { CheckStatus, FileCheckSpec } from './types';
import { normaliseWorktreePath } from './worktree-path';

/** `contains` and `matches` read files up to this size. */
export const MAX_ASSERTED_FILE_BYTES = 32 * 1024 * 1024;
/** A `matches` expression runs at most this long (or the check's timeout when shorter). */
export const MAX_MATCH_MS = 10_000;

/**
 * A file assertion, with the path resolved inside the worktree and symbolic links followed: a
 * path whose real location is outside the worktree is refused, whatever it points at.
 */
export async function evaluateFileCheck(
  spec: FileCheckSpec,
  worktreeDir: string,
  timeoutMs = MAX_MATCH_MS,
): Promise<{ status: CheckStatus; message: string }> {
  const written = normaliseWorktreePath(spec.path);
  if ('error' in written) return { status: 'refused', message: `${written.error}` };
  const root = await fs.realpath(worktreeDir).catch(() => null);
  if (root === null) return { status: 'not-started', message: `the worktree folder ${worktreeDir} does not exist; Forge checks files in the loop's worktree` };
  const path = written.path;
  const real = realPathThroughLinks(join(root, path));
  const located = { real, exists: existsSync(real) };
  if (!isInside(root, located.real)) {
    return {
      status: 'refused',
      message: `${path} leads to ${located.real} through a symbolic link, outside the worktree; Forge checks files inside the worktree only: check a file of the repository instead`,
    };
  }
  if (!located.exists) return { status: 'failed', message: `${path} does not exist in the worktree` };
  if (spec.kind === 'exists') return { status: 'passed', message: `${path} exists` };
  const stat = await fs.stat(located.real);
  if (stat.isDirectory()) return { status: 'failed', message: `${path} is a folder; "${spec.kind}" reads a file: name a file` };
  if (stat.size > MAX_ASSERTED_FILE_BYTES) {
    return { status: 'failed', message: `${path} is ${(stat.size / 1024 / 1024).toFixed(1)} MB; Forge reads files up to ${MAX_ASSERTED_FILE_BYTES / 1024 / 1024} MB for "${spec.kind}"` };
  }
  const content = await fs.readFile(located.real, 'utf8');
  if (spec.kind === 'contains') {
    return content.includes(spec.text)
      ? { status: 'passed', message: `${path} contains ${JSON.stringify(spec.text)}` }
      : { status: 'failed', message: `${path} does not contain ${JSON.stringify(spec.text)}` };
  }
  // A backtracking expression could hold Forge's event loop for hours: it runs under a timeout.
  const limitMs = Math.min(timeoutMs, MAX_MATCH_MS);
  let matched: boolean;
  try {
    matched = runInNewContext('regex.test(content)', { regex: new RegExp(spec.pattern, spec.flags), content }, { timeout: limitMs }) as boolean;
  } catch (error) {
    if ((error as { code?: string }).code !== 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw error;
    return {
      status: 'timed-out',
      message: `/${spec.pattern}/${spec.flags} did not finish on ${path} within ${limitMs} ms (the expression backtracks too much): simplify it`,
    };
  }
  return matched
    ? { status: 'passed', message: `${path} matches /${spec.pattern}/${spec.flags}` }
    : { status: 'failed', message: `${path} does not match /${spec.pattern}/${spec.flags}` };
}

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}
