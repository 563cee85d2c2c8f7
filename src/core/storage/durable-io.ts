import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { ForgeDatabaseError } from './errors';
import { corruptFileName } from './database-files';

/*
 * File primitives of the database: positional reads and writes, durable
 * (fsync'ed) file creation, directory fsync for renames, and moving a damaged
 * file aside. No knowledge of the snapshot or journal formats.
 */

export function readRange(fd: number, start: number, end: number): Buffer {
  const buf = Buffer.allocUnsafe(Math.max(0, end - start));
  let filled = 0;
  while (filled < buf.length) {
    const n = fs.readSync(fd, buf, filled, buf.length - filled, start + filled);
    if (n === 0) break; // the file shrank meanwhile
    filled += n;
  }
  return buf.subarray(0, filled);
}

export function writeAll(fd: number, buf: Uint8Array, position: number): void {
  let written = 0;
  while (written < buf.length) {
    written += fs.writeSync(fd, buf, written, buf.length - written, position + written);
  }
}

export function fsyncDirectory(directory: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(directory, 'r');
    fs.fsyncSync(fd);
  } catch (error) {
    // Windows cannot open or fsync a directory; renames there are durable through NTFS's own log.
    if (process.platform !== 'win32') throw error;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

export function writeFileDurablySync(filePath: string, data: Uint8Array): void {
  const fd = fs.openSync(filePath, 'wx');
  try {
    writeAll(fd, data, 0);
    fs.fdatasyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export async function writeFileDurably(filePath: string, data: Uint8Array): Promise<void> {
  const handle = await fsp.open(filePath, 'wx');
  try {
    await handle.writeFile(data);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

export function unlinkQuietly(filePath: string): void {
  try {
    fs.unlinkSync(filePath);
  } catch {
    // best effort: a leftover temp file is removed at the next open
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}


/** Renames a damaged file to a free `.corrupt-<time>` name beside it (never deletes it) and returns that name. */
export function moveAside(filePath: string, directory: string): string {
  const now = new Date();
  for (let attempt = 1; attempt < 1000; attempt++) {
    const target = corruptFileName(filePath, now, attempt);
    if (fs.existsSync(target)) continue;
    try {
      fs.renameSync(filePath, target);
      fsyncDirectory(directory);
      return target;
    } catch (error) {
      throw new ForgeDatabaseError(
        'corrupt',
        filePath,
        `Forge found ${filePath} damaged and could not move it aside to ${target} (${errorMessage(error)}). ` +
          `Move or rename that file yourself, then start Forge again.`,
        { cause: error },
      );
    }
  }
  throw new ForgeDatabaseError('corrupt', filePath, `Forge found ${filePath} damaged and could not find a free name to move it to. Move it yourself.`);
}
