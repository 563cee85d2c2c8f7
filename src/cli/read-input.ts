/**
 * Reads a markdown file the user named (a plan, a PRD), turning what can go wrong into usage
 * errors. Bounded and never blocking: the file is opened with O_NONBLOCK and checked with fstat
 * (a FIFO, a device such as /dev/zero or a socket is refused without waiting for a writer), and at
 * most `limit + 1` bytes are read, so an endless or huge file is refused instead of filling memory.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { MAX_PRD_BYTES } from '../core/groups/group-types';
import { UsageError } from './args';

/** Plans: the engine refuses larger ones (plan.ts). */
export const MAX_PLAN_FILE_BYTES = 1_000_000;
/** PRDs go whole into one splitter request (the group service refuses larger ones). */
export const MAX_PRD_FILE_BYTES = MAX_PRD_BYTES;

export async function readInputFile(path: string, what: 'Plan' | 'PRD'): Promise<string> {
  const limit = what === 'Plan' ? MAX_PLAN_FILE_BYTES : MAX_PRD_FILE_BYTES;
  const kind = what === 'Plan' ? 'plan' : 'PRD';
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new UsageError(`${what} file ${path} does not exist.`);
    if (code === 'EACCES' || code === 'EPERM') throw new UsageError(`${what} file ${path} cannot be read (permission denied).`);
    if (code === 'ENOTDIR') throw new UsageError(`${what} file ${path} does not exist (a part of its path is not a folder).`);
    if (code === 'ENXIO' || code === 'EWOULDBLOCK' || code === 'EAGAIN') throw new UsageError(`${path} is not a regular file; give the path of a markdown ${kind} file.`);
    throw new UsageError(`${what} file ${path} cannot be opened (${code ?? (error as Error).message}).`);
  }
  try {
    const info = await handle.stat();
    if (info.isDirectory()) throw new UsageError(`${path} is a folder; give the path of a markdown ${kind} file.`);
    if (!info.isFile()) throw new UsageError(`${path} is not a regular file (a pipe, device or socket); give the path of a markdown ${kind} file.`);
    if (info.size > limit) throw new UsageError(`${what} file ${path} is ${formatSize(info.size)}; Forge reads ${kind}s of at most ${formatSize(limit)}. Split it into smaller ${kind}s.`);
    const buffer = Buffer.alloc(limit + 1);
    let length = 0;
    // A file growing while it is read still stops at limit + 1 bytes.
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > limit) throw new UsageError(`${what} file ${path} is larger than ${formatSize(limit)}; Forge reads ${kind}s of at most that. Split it into smaller ${kind}s.`);
    return buffer.subarray(0, length).toString('utf8');
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EISDIR') throw new UsageError(`${path} is a folder; give the path of a markdown ${kind} file.`);
    throw new UsageError(`${what} file ${path} cannot be read (${code ?? (error as Error).message}).`);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

function formatSize(bytes: number): string {
  return bytes >= 1_000_000 ? `${(bytes / 1_000_000).toFixed(1)} MB` : `${Math.round(bytes / 1024)} KB`;
}
