/**
 * The throw-away worktrees a merge without checkout makes (`<dataDir>/worktrees/.merge-…`,
 * registered in the user's repository while they exist): each is owned by the process that
 * made it, recorded in `<dataDir>/owners/merge-worktrees/<name>.json` before `git worktree add`, removed after
 * `git worktree remove`. A process killed mid-merge leaves both behind; `sweepMergeScratch`
 * (the engine's start-up cleanup) removes those whose owner is dead — the registration in the
 * repository and the folder — and never one whose owner may still run.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseWorktreeList } from './git-output';
import type { GitRunner } from './git-runner';
import { ownerState, removeOwnerRecord, writeOwnerRecord } from '../process/owner-records';

export const MERGE_SCRATCH_PREFIX = '.merge-';
/** The gate's clean checkouts of a loop's delivered work (delivered-work.ts): owned and swept alike. */
export const GATE_SCRATCH_PREFIX = '.gate-';
/** Owner records live beside the worktrees root (`<dataDir>/owners/…`), never inside it: that folder holds worktrees only. */
const ownersDir = (root: string) => path.join(path.dirname(root), 'owners', 'merge-worktrees');
const ownerFile = (root: string, scratch: string) => path.join(ownersDir(root), `${path.basename(scratch)}.json`);

/** Records this process as the owner of `scratch` (before it is made). */
export function claimMergeScratch(root: string, scratch: string): Promise<void> {
  return writeOwnerRecord(ownerFile(root, scratch));
}

/** After `scratch` is gone. */
export function releaseMergeScratch(root: string, scratch: string): Promise<void> {
  return removeOwnerRecord(ownerFile(root, scratch));
}

function isScratchName(name: string): boolean {
  return name.startsWith(MERGE_SCRATCH_PREFIX) || name.startsWith(GATE_SCRATCH_PREFIX);
}

function scratchKind(dir: string): string {
  return path.basename(dir).startsWith(GATE_SCRATCH_PREFIX) ? 'gate checkout' : 'merge worktree';
}

/**
 * Removes the merge worktrees (and the gate's checkouts) under `root` whose owner is not alive: registered ones in each
 * of `repoDirs` (`git worktree remove --force`, or their administrative folder when the
 * folder is gone already), then unregistered folders. Returns what it removed, one line each.
 */
export async function sweepMergeScratch(git: GitRunner, root: string, repoDirs: readonly string[]): Promise<string[]> {
  const removed: string[] = [];
  const orphaned = (dir: string) => ownerState(ownerFile(root, dir)) !== 'alive';
  for (const repoDir of new Set(repoDirs)) {
    const listed = await git.run(repoDir, ['worktree', 'list', '--porcelain']);
    if (listed.exitCode !== 0) continue; // a repository that is gone or unreadable: nothing of it to clean here
    for (const entry of parseWorktreeList(listed.stdout)) {
      if (path.dirname(entry.path) !== root || !isScratchName(path.basename(entry.path)) || !orphaned(entry.path)) continue;
      const r = await git.run(repoDir, ['worktree', 'remove', '--force', '--force', entry.path]);
      if (r.exitCode !== 0 && !(await removeAdminFolder(git, repoDir, entry.path))) continue;
      await fs.rm(entry.path, { recursive: true, force: true });
      await releaseMergeScratch(root, entry.path);
      removed.push(`${scratchKind(entry.path)} ${entry.path} (registered in ${repoDir})`);
    }
  }
  const entries = await fs.readdir(root, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const dir = path.join(root, e.name);
    if (!e.isDirectory() || !isScratchName(e.name) || !orphaned(dir)) continue;
    // A repository Forge's database does not name (or no longer): its registration is found from the folder.
    const unregistered = await unregisterThroughGitFile(dir);
    await fs.rm(dir, { recursive: true, force: true });
    await releaseMergeScratch(root, dir);
    removed.push(unregistered ? `${scratchKind(dir)} ${dir} (registered in ${unregistered})` : `${scratchKind(dir)} folder ${dir}`);
  }
  // Records whose worktree is gone and whose owner is dead.
  for (const f of await fs.readdir(ownersDir(root)).catch(() => [] as string[])) {
    const file = path.join(ownersDir(root), f);
    if (ownerState(file) !== 'alive') await fs.rm(file, { force: true });
  }
  return removed;
}

/**
 * Unregisters the worktree in `dir` through its `.git` file (`gitdir: <common>/worktrees/<id>`):
 * only when that administrative folder's own `gitdir` points back at `dir/.git`, so a rewritten
 * `.git` file can never make Forge remove another worktree's registration. Returns the repository's
 * git folder, or null.
 */
async function unregisterThroughGitFile(dir: string): Promise<string | null> {
  const text = await fs.readFile(path.join(dir, '.git'), 'utf8').catch(() => '');
  const m = /^gitdir: (.+)$/m.exec(text);
  if (!m) return null;
  const admin = path.resolve(dir, m[1]!.trim());
  if (path.basename(path.dirname(admin)) !== 'worktrees') return null;
  const back = (await fs.readFile(path.join(admin, 'gitdir'), 'utf8').catch(() => '')).trim();
  if (back !== path.join(dir, '.git')) return null;
  await fs.rm(admin, { recursive: true, force: true });
  return path.dirname(path.dirname(admin));
}

/** Unregisters `worktree` (whose folder is gone) from `repoDir` by its administrative folder alone, never pruning others. */
async function removeAdminFolder(git: GitRunner, repoDir: string, worktree: string): Promise<boolean> {
  const common = await git.run(repoDir, ['rev-parse', '--path-format=absolute', '--git-common-dir']);
  if (common.exitCode !== 0) return false;
  const adminRoot = path.join(common.stdout.trim(), 'worktrees');
  for (const id of await fs.readdir(adminRoot).catch(() => [] as string[])) {
    const gitdir = (await fs.readFile(path.join(adminRoot, id, 'gitdir'), 'utf8').catch(() => '')).trim();
    if (gitdir === path.join(worktree, '.git')) {
      await fs.rm(path.join(adminRoot, id), { recursive: true, force: true });
      return true;
    }
  }
  return false;
}
