/**
 * File assertions (`exists`, `contains`, `matches`), evaluated in Node on the worktree's real
 * files: the path is resolved inside the worktree and symbolic links are followed; a path whose
 * real location leaves the worktree is refused, whatever it points at.
 *
 * The worktree is hostile (issue 27): a file may have been replaced by a named pipe, a socket or
 * a device. `contains` and `matches` open the file without blocking and without following a
 * link (O_NONBLOCK | O_NOFOLLOW), look at what they opened (fstat) and read only a regular file,
 * at most MAX_ASSERTED_FILE_BYTES of it: a read can never wait on a writer that does not come.
 */
import { constants as fsConstants, existsSync, promises as fs } from 'node:fs';
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
  const read = await readRegularFile(located.real, path, spec.kind);
  if ('failed' in read) return { status: 'failed', message: read.failed };
  const content = read.content;
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

/** What a non-regular file is, for messages. */
function describeFileType(stat: { isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean }): string {
  if (stat.isDirectory()) return 'a folder';
  if (stat.isFIFO()) return 'a named pipe (FIFO)';
  if (stat.isSocket()) return 'a socket';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/**
 * The text of a regular file, read without blocking and without following a link, at most
 * MAX_ASSERTED_FILE_BYTES; or why it was not read (one line, for the failed check's message).
 */
async function readRegularFile(real: string, path: string, kind: string): Promise<{ content: string } | { failed: string }> {
  const refuse = (what: string) => ({
    failed: `${path} is ${what}, not a regular file; Forge reads only regular files for "${kind}": the check needs ${path} to be a file of the repository`,
  });
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(real, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENXIO') return refuse('a socket');
    if (code === 'ELOOP') return { failed: `${path} became a symbolic link while Forge checked it; Forge does not follow it` };
    if (code === 'ENOENT') return { failed: `${path} does not exist in the worktree` };
    return { failed: `${path} could not be opened (${code ?? (error as Error).message})` };
  }
  try {
    const stat = await handle.stat();
    if (stat.isDirectory()) return { failed: `${path} is a folder; "${kind}" reads a file: name a file` };
    if (!stat.isFile()) return refuse(describeFileType(stat));
    if (stat.size > MAX_ASSERTED_FILE_BYTES) {
      return { failed: `${path} is ${(stat.size / 1024 / 1024).toFixed(1)} MB; Forge reads files up to ${MAX_ASSERTED_FILE_BYTES / 1024 / 1024} MB for "${kind}"` };
    }
    // One byte past the size fstat gave: a file that grows while Forge reads it is said so, not cut.
    const buffer = Buffer.alloc(stat.size + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled === buffer.length) return { failed: `${path} grew while Forge read it for "${kind}"; check a file nothing writes to while the checks run` };
    }
    return { content: buffer.subarray(0, filled).toString('utf8') };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}
