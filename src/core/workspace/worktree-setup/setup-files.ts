/**
 * `.worktreeinclude` (issue 27): ignored files of the user's checkout that a loop's worktree
 * gets a copy of (`.env`, local configuration). gitignore syntax, matched by git itself in the
 * checkout; only files that are ignored there AND match are copied, only regular files, and never
 * through a symbolic link on either side. Nothing else ignored is copied.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { copyFile, lstat, mkdir, mkdtemp, open, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Safe relative paths only: no absolute path, no `..`, nothing in `.git`. Pure. */
export function includedPaths(ignored: readonly string[], matching: readonly string[]): string[] {
  const ignoredSet = new Set(ignored);
  const out = new Set<string>();
  for (const p of matching) {
    if (!ignoredSet.has(p)) continue;
    if (p === '' || p.startsWith('/') || p.includes('\0')) continue;
    const parts = p.split('/');
    if (parts.some((part) => part === '' || part === '.' || part === '..' || part === '.git')) continue;
    out.add(p);
  }
  return [...out].sort();
}

/** NUL-separated `git ls-files -z` output as paths. Pure. */
export function splitNul(text: string): string[] {
  return text.split('\0').filter((p) => p !== '');
}

export interface CopiedFile {
  path: string;
  /** sha256 of what was copied: the gate's in-place proof ignores the file while it is unchanged. */
  sha256: string;
}

export interface IncludeDeps {
  /** Runs git in `cwd` (Forge's hardened git) and returns its standard output; rejects on failure. */
  git(cwd: string, args: string[]): Promise<string>;
}

/** The ignored files of `checkoutDir` that `patterns` (gitignore syntax) selects. */
export async function listIncludedFiles(deps: IncludeDeps, checkoutDir: string, patterns: string): Promise<string[]> {
  if (patterns.trim() === '') return [];
  const dir = await mkdtemp(path.join(tmpdir(), 'forge-include-'));
  try {
    const file = path.join(dir, 'worktreeinclude');
    await writeFile(file, patterns);
    const [ignored, matching] = await Promise.all([
      deps.git(checkoutDir, ['ls-files', '-z', '--others', '--ignored', '--exclude-standard']),
      deps.git(checkoutDir, ['ls-files', '-z', '--others', '--ignored', `--exclude-from=${file}`]),
    ]);
    return includedPaths(splitNul(ignored), splitNul(matching));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** True when `p`'s real path is exactly `root/rel` (no link on the way). */
async function reachedWithoutLinks(root: string, rel: string): Promise<boolean> {
  try {
    return (await realpath(path.join(root, rel))) === path.join(await realpath(root), rel);
  } catch {
    return false;
  }
}

/**
 * Copies each file from the checkout into the worktree at the same path. A file that is not a
 * regular file, or lies behind a link in the checkout, is skipped (named in `skipped`); in the
 * worktree, folders are made as needed and a link on the way (or at the file) refuses the copy.
 */
export async function copyIncludedFiles(checkoutDir: string, worktreeDir: string, files: readonly string[]): Promise<{ copied: CopiedFile[]; skipped: string[] }> {
  const copied: CopiedFile[] = [];
  const skipped: string[] = [];
  for (const rel of files) {
    const src = path.join(checkoutDir, rel);
    const st = await lstat(src).catch(() => null);
    if (!st || !st.isFile() || !(await reachedWithoutLinks(checkoutDir, rel))) {
      skipped.push(rel);
      continue;
    }
    const parent = path.dirname(rel);
    if (parent !== '.') {
      await mkdir(path.join(worktreeDir, parent), { recursive: true });
      if (!(await reachedWithoutLinks(worktreeDir, parent))) {
        skipped.push(rel);
        continue;
      }
    }
    const dest = path.join(worktreeDir, rel);
    const existing = await lstat(dest).catch(() => null);
    if (existing && !existing.isFile()) {
      skipped.push(rel);
      continue;
    }
    // Read through O_NOFOLLOW (a link swapped in since the check is refused), write a fresh file.
    const handle = await open(src, constants.O_RDONLY | constants.O_NOFOLLOW);
    let bytes: Buffer;
    try {
      bytes = await handle.readFile();
    } finally {
      await handle.close();
    }
    await rm(dest, { force: true });
    const out = await open(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, st.mode & 0o777);
    try {
      await out.writeFile(bytes);
    } finally {
      await out.close();
    }
    copied.push({ path: rel, sha256: sha256(bytes) });
  }
  return { copied, skipped };
}

export function sha256(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The sha256 of a regular file (not through a link), or null. */
export async function fileSha256(file: string): Promise<string | null> {
  const st = await lstat(file).catch(() => null);
  if (!st?.isFile()) return null;
  return sha256(await readFile(file));
}

/** Copies the prepared files into another folder (the gate's clean checkout), when they are regular files there. */
export async function copyPreparedFiles(fromDir: string, toDir: string, files: readonly CopiedFile[]): Promise<void> {
  for (const f of files) {
    const src = path.join(fromDir, f.path);
    if (!(await reachedWithoutLinks(fromDir, f.path)) || (await fileSha256(src)) !== f.sha256) continue;
    const dest = path.join(toDir, f.path);
    await mkdir(path.dirname(dest), { recursive: true });
    if (!(await reachedWithoutLinks(toDir, path.dirname(f.path)))) continue;
    await copyFile(src, dest, constants.COPYFILE_EXCL).catch(() => undefined);
  }
}
