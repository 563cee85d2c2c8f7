/**
 * The work a loop delivers, for its verification gate (issue 27): exactly what the loop's next
 * commit would hold (everything `git add -A` stages, ignored files and untracked artefact folders
 * left out), and nothing else that lies around in the worktree.
 *
 * Two ways to have the checks see only that, whichever is cheaper (bench/gate.mjs):
 * - the worktree is proven to hold nothing beyond it: after staging, `git status --ignored` lists
 *   no untracked, ignored or unstaged entry (one git process, a few ms): checks run in the
 *   worktree as before;
 * - otherwise a clean checkout of it: the staged tree becomes a commit on no branch (`commit-tree`,
 *   parent HEAD), checked out as a detached throw-away worktree beside the loop worktrees (Forge's
 *   hardened git: no filter or hook of the agent's runs), where the checks run in a sandbox of
 *   their own (git works there as in the loop's worktree); removed after them.
 * Files git does not track at all (named pipes, sockets) are invisible to both ways; the file
 * assertions refuse them (checks/file-assertions.ts).
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { GitRunner } from './git-runner';
import { claimMergeScratch, GATE_SCRATCH_PREFIX, releaseMergeScratch } from './merge-scratch';

export type DeliveredWork =
  /** The worktree holds the delivered tree and nothing else: check it in place. */
  | { kind: 'in-place'; tree: string }
  /** A clean checkout of the delivered tree in `dir`; `dispose` removes it. */
  | { kind: 'checkout'; tree: string; dir: string; why: string; dispose(): Promise<void> };

export interface DeliveredWorkDeps {
  git: GitRunner;
  /** `<dataDir>/worktrees`: the checkout goes beside the loop worktrees (`.gate-<loop>-<hex>`). */
  worktreesRoot(): Promise<string>;
  /** Stages the loop's own work as its commit would (`git add -A` without artefact folders). */
  stage(worktreeDir: string, onAgentGitChanges?: (changes: ReadonlyArray<{ kind: string; path: string; detail: string }>) => void): Promise<void>;
  /** `user.name=…`, `user.email=…` settings for the throw-away commit. */
  identityConfig(worktreeDir: string): Promise<string[]>;
}

/**
 * What a `git status --porcelain=v1 -z --ignored --untracked-files=all` listing holds beyond
 * staged changes: the first such entry (`?? add.js`, `!! add.js`, ` M a.js`), or null. Pure.
 */
export function firstUndeliveredEntry(porcelainZ: string): string | null {
  return undeliveredEntries(porcelainZ)[0] ?? null;
}

/** Every entry of such a listing beyond staged changes, in order. Pure. */
export function undeliveredEntries(porcelainZ: string): string[] {
  const entries = porcelainZ.split('\0');
  const out: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    if (entry === '') continue;
    const [x, y] = [entry[0], entry[1]];
    // A rename or copy carries its source as the next entry.
    if (x === 'R' || x === 'C') i++;
    if (x === '?' || x === '!' || y !== ' ') out.push(entry);
  }
  return out;
}

export function createDeliveredWork(deps: DeliveredWorkDeps) {
  /** The loop's delivered work, staged in its worktree, in place when proven clean, else as a clean checkout. */
  async function deliveredWork(
    worktreeDir: string,
    loopName: string,
    onAgentGitChanges?: (changes: ReadonlyArray<{ kind: string; path: string; detail: string }>) => void,
    /** Forge's own prepared files (issue 27: `.worktreeinclude` copies, unchanged): not held against the proof. */
    isPrepared?: (ignoredPath: string) => Promise<boolean>,
  ): Promise<DeliveredWork> {
    await deps.stage(worktreeDir, onAgentGitChanges);
    const tree = (await deps.git.ok(worktreeDir, ['write-tree'])).trim();
    const status = await deps.git.ok(worktreeDir, ['status', '--porcelain=v1', '-z', '--ignored=matching', '--untracked-files=all']);
    let extra: string | null = null;
    for (const entry of undeliveredEntries(status)) {
      // Only an ignored or untracked entry can be Forge's (a copied file, an unconfined loop's link).
      if (isPrepared && (entry.startsWith('!! ') || entry.startsWith('?? ')) && (await isPrepared(entry.slice(3)))) continue;
      extra = entry;
      break;
    }
    if (extra === null) return { kind: 'in-place', tree };
    const root = await deps.worktreesRoot();
    const dir = path.join(root, `${GATE_SCRATCH_PREFIX}${loopName}-${randomBytes(4).toString('hex')}`);
    const head = (await deps.git.ok(worktreeDir, ['rev-parse', '--verify', 'HEAD'])).trim();
    const config = await deps.identityConfig(worktreeDir);
    const commit = (await deps.git.ok(worktreeDir, ['commit-tree', tree, '-p', head, '-m', `forge: the work loop ${loopName} delivers (for its checks)`], { config })).trim();
    const dispose = async () => {
      await deps.git.run(worktreeDir, ['worktree', 'remove', '--force', dir]).catch(() => undefined);
      await rm(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
      await deps.git.run(worktreeDir, ['worktree', 'prune']).catch(() => undefined);
      await releaseMergeScratch(root, dir);
    };
    // Owned from before it exists: a crash leaves it to the next start's cleanup (merge-scratch.ts).
    await claimMergeScratch(root, dir);
    try {
      await deps.git.ok(worktreeDir, ['worktree', 'add', '--detach', dir, commit]);
    } catch (error) {
      await dispose();
      throw error;
    }
    return { kind: 'checkout', tree, dir, why: `the worktree holds ${describeEntry(extra)}, which the loop does not commit`, dispose };
  }
  /** Files changed from `base` to `tree` (renames detected), for the gate's verification-change check. */
  async function changedSince(worktreeDir: string, base: string, tree: string): Promise<Array<{ status: string; path: string; oldPath?: string }>> {
    const out = await deps.git.ok(worktreeDir, ['diff', '--name-status', '-z', '--no-ext-diff', '--no-textconv', '-M', base, tree, '--']);
    const parts = out.split('\0');
    const changed: Array<{ status: string; path: string; oldPath?: string }> = [];
    for (let i = 0; i + 1 < parts.length; ) {
      const status = parts[i++]!.charAt(0);
      if (status === '') break;
      if (status === 'R' || status === 'C') {
        const oldPath = parts[i++]!;
        changed.push({ status, path: parts[i++]!, oldPath });
      } else changed.push({ status, path: parts[i++]! });
    }
    return changed;
  }
  /** A file's text in a commit or tree (at most 1 MiB), or null when it is not there. */
  async function textAt(worktreeDir: string, rev: string, file: string): Promise<string | null> {
    const size = await deps.git.run(worktreeDir, ['cat-file', '-s', `${rev}:${file}`]);
    if (size.exitCode !== 0 || Number(size.stdout.trim()) > 1024 * 1024) return null;
    const blob = await deps.git.run(worktreeDir, ['cat-file', 'blob', `${rev}:${file}`]);
    return blob.exitCode === 0 ? blob.stdout : null;
  }
  return { deliveredWork, changedSince, textAt };
}

function describeEntry(entry: string): string {
  const file = entry.slice(3);
  if (entry.startsWith('!!')) return `the ignored file ${file}`;
  if (entry.startsWith('??')) return `the untracked file ${file}`;
  return `the unstaged change of ${file}`;
}
