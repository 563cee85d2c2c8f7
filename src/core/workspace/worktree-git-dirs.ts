/**
 * Which repository Forge's git uses for a loop's worktree, and whether the worktree still
 * holds the invariants that make handing it to git (Forge's, or VS Code's) safe (issue 26).
 *
 * The git dir is the one `git worktree add` made: `<common dir>/worktrees/<name>`, whose
 * `gitdir` file points back at `<worktree>/.git`. Both live in the repository's `.git`, which
 * the sandbox mounts read-only; the worktree's own `.git` file is agent-writable input and is
 * only ever compared against it, never followed.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gitFileContent, hardenedGitEnv, parseDriverNames, parseGitFile, type HardenedGitTarget } from './git-hardening';
import { WorkspaceError } from './workspace-error';
import { isInside } from './workspace-paths';
import { runProcess } from '../process/process-runner';

/** One way a worktree breaks the invariants. */
export interface WorktreeIntegrityProblem {
  kind: 'git-file' | 'nested-repository' | 'git-dir';
  /** Worktree-relative path (`/`-separated) or the git dir's file. */
  path: string;
  /** One sentence: what is wrong. */
  detail: string;
}

export interface WorktreeGitDirs {
  /** Finds (and remembers) Forge's git dir for a loop worktree of the repository whose common dir is `commonDir`. */
  register(worktreeDir: string, commonDir: string): Promise<HardenedGitTarget>;
  /** For the git runner: the target for a worktree folder, null for any other folder. */
  targetFor(cwd: string): Promise<HardenedGitTarget | null>;
  /** The invariants checked, without changing anything (`nested`: walk the tree for other repositories). */
  inspect(worktreeDir: string, options?: { nested?: boolean }): Promise<WorktreeIntegrityProblem[]>;
  /** Puts the `.git` file back when the agent changed it; what was wrong (empty: nothing). */
  restoreGitFile(worktreeDir: string): Promise<WorktreeIntegrityProblem[]>;
}

export interface WorktreeGitDirsOptions {
  /** Folders directly inside it are loop worktrees: git never runs on them unhardened. */
  loopWorktreesRoot?: () => Promise<string>;
  env?: Readonly<Record<string, string | undefined>>;
}

async function canonical(p: string): Promise<string> {
  try {
    return await realpath(p);
  } catch {
    return path.resolve(p);
  }
}

async function readSmall(file: string): Promise<string | null> {
  try {
    const st = await lstat(file);
    if (!st.isFile() || st.size > 64 * 1024) return null;
    return await readFile(file, 'utf8');
  } catch {
    return null;
  }
}

export function createWorktreeGitDirs(options: WorktreeGitDirsOptions = {}): WorktreeGitDirs {
  const baseEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.env ?? process.env)) if (v !== undefined) baseEnv[k] = v;
  const env = { ...hardenedGitEnv(baseEnv), LC_ALL: 'C' };
  const targets = new Map<string, Promise<HardenedGitTarget>>();
  /** Per git dir: a fingerprint of what configures or hooks git, taken when first seen. */
  const fingerprints = new Map<string, string>();

  /** The names only, so 1 MiB is plenty; a git that cannot run reads as none. */
  function gitConfigNames(gitDir: string): Promise<string> {
    return runProcess('git', [`--git-dir=${gitDir}`, 'config', '--name-only', '--get-regexp', '^(filter|merge)\\.'], { env, stdin: 'ignore', maxOutputBytes: 1024 * 1024 }).then(
      (r) => r.stdout,
      () => '',
    );
  }

  async function fingerprint(gitDir: string, commonDir: string): Promise<string> {
    const hash = createHash('sha256');
    for (const file of [path.join(gitDir, 'config.worktree'), path.join(commonDir, 'config'), path.join(commonDir, 'config.worktree')]) {
      hash.update(`${file}\0${(await readSmall(file)) ?? '-'}\0`);
    }
    for (const hooks of [path.join(gitDir, 'hooks'), path.join(commonDir, 'hooks')]) {
      const names = await readdir(hooks).catch(() => [] as string[]);
      for (const name of names.sort()) hash.update(`${hooks}/${name}\0${(await readSmall(path.join(hooks, name))) ?? '?'}\0`);
    }
    return hash.digest('hex');
  }

  async function targetOf(gitDir: string, commonDir: string, workTree: string): Promise<HardenedGitTarget> {
    if (!fingerprints.has(gitDir)) fingerprints.set(gitDir, await fingerprint(gitDir, commonDir));
    return { gitDir, workTree, drivers: parseDriverNames(await gitConfigNames(gitDir)) };
  }

  /** The git dir under `commonDir/worktrees/` whose `gitdir` file names `<worktree>/.git`. */
  async function findGitDir(worktreeDir: string, commonDir: string): Promise<string | null> {
    const expected = path.join(worktreeDir, '.git');
    const root = path.join(commonDir, 'worktrees');
    for (const name of await readdir(root).catch(() => [] as string[])) {
      const back = await readSmall(path.join(root, name, 'gitdir'));
      if (back !== null && path.resolve(root, name, back.trim()) === expected) return path.join(root, name);
    }
    return null;
  }

  /**
   * Without a registration (a fresh process): the git dir the `.git` file names, accepted only
   * when it is outside the worktree, sits in a `worktrees/` folder of a repository and its
   * `gitdir` file points back at this worktree. The agent can write only inside the worktree,
   * so it cannot make such a git dir.
   */
  async function validatedFromGitFile(worktreeDir: string): Promise<HardenedGitTarget> {
    const fail = (why: string) =>
      new WorkspaceError(
        'worktree_mismatch',
        `Forge will not run git in ${worktreeDir}: ${why}. The loop's agent may have changed it; run the loop again (Forge restores it) or remove the worktree.`,
      );
    const text = await readSmall(path.join(worktreeDir, '.git'));
    const named = text === null ? null : parseGitFile(text);
    if (named === null || !path.isAbsolute(named)) throw fail('its .git file is not the one git made');
    const gitDir = await canonical(named);
    if (isInside(worktreeDir, gitDir) || gitDir === worktreeDir) throw fail(`its .git file points inside the worktree (${named})`);
    if (path.basename(path.dirname(gitDir)) !== 'worktrees') throw fail(`its .git file points at ${named}, not at a worktree's git dir`);
    const commonDir = path.dirname(path.dirname(gitDir));
    const back = await readSmall(path.join(gitDir, 'gitdir'));
    if (back === null || path.resolve(gitDir, back.trim()) !== path.join(worktreeDir, '.git')) throw fail(`the git dir ${gitDir} belongs to another worktree`);
    const common = await readSmall(path.join(gitDir, 'commondir'));
    if (common === null || (await canonical(path.resolve(gitDir, common.trim()))) !== commonDir) throw fail(`the git dir ${gitDir} is not part of ${commonDir}`);
    return targetOf(gitDir, commonDir, worktreeDir);
  }

  function remember(worktreeDir: string, make: () => Promise<HardenedGitTarget>): Promise<HardenedGitTarget> {
    let hit = targets.get(worktreeDir);
    if (!hit) {
      hit = make();
      targets.set(worktreeDir, hit);
      hit.catch(() => targets.delete(worktreeDir));
    }
    return hit;
  }

  async function register(worktreeDirInput: string, commonDirInput: string): Promise<HardenedGitTarget> {
    const worktreeDir = await canonical(worktreeDirInput);
    const commonDir = await canonical(commonDirInput);
    // Looked up again each time (a restart, a recreated worktree): the registration may be gone.
    targets.delete(worktreeDir);
    return remember(worktreeDir, async () => {
      const gitDir = await findGitDir(worktreeDir, commonDir);
      if (gitDir === null) {
        throw new WorkspaceError('worktree_mismatch', `${worktreeDir} is not a worktree git made for the repository at ${commonDir}. Move it away and restart the loop (Forge recreates it from its branch).`);
      }
      return targetOf(gitDir, commonDir, worktreeDir);
    });
  }

  async function targetFor(cwd: string): Promise<HardenedGitTarget | null> {
    const dir = await canonical(cwd);
    const hit = targets.get(dir);
    if (hit) return hit;
    const root = options.loopWorktreesRoot ? await options.loopWorktreesRoot() : null;
    const inRoot = root !== null && path.dirname(dir) === root;
    let kind: 'file' | 'dir' | 'other' | 'missing' = 'missing';
    try {
      const st = await lstat(path.join(dir, '.git'));
      kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other';
    } catch {
      kind = 'missing';
    }
    // A folder of the user's (a checkout, a subfolder of one, a linked worktree of their own
    // when Forge's worktrees folder is known): git as the user runs it.
    if (!inRoot && (kind === 'dir' || kind === 'missing' || root !== null)) return null;
    // In Forge's worktrees folder, a missing .git is a folder git does not know: git must not look above it.
    if (inRoot && kind === 'missing') {
      throw new WorkspaceError('worktree_mismatch', `Forge will not run git in ${dir}: it has no .git file. Run the loop again (Forge recreates its worktree from its branch) or remove the folder.`);
    }
    return remember(dir, () => validatedFromGitFile(dir));
  }

  async function expectedGitDir(worktreeDir: string): Promise<HardenedGitTarget> {
    const dir = await canonical(worktreeDir);
    const hit = targets.get(dir);
    if (hit) return hit;
    return remember(dir, () => validatedFromGitFile(dir));
  }

  async function gitFileProblems(worktreeDir: string, target: HardenedGitTarget): Promise<WorktreeIntegrityProblem[]> {
    const file = path.join(worktreeDir, '.git');
    let st;
    try {
      st = await lstat(file);
    } catch {
      return [{ kind: 'git-file', path: '.git', detail: 'the worktree\'s .git file was removed' }];
    }
    if (!st.isFile()) return [{ kind: 'git-file', path: '.git', detail: `the worktree's .git file was replaced by a ${st.isDirectory() ? 'folder (a repository of the agent\'s)' : 'link'}` }];
    const text = await readSmall(file);
    if (text === null || (parseGitFile(text) !== null && (await canonical(parseGitFile(text)!)) === target.gitDir)) return [];
    const named = text === null ? null : parseGitFile(text);
    return [{ kind: 'git-file', path: '.git', detail: `the worktree's .git file was rewritten to point at ${named ?? 'something else'} instead of Forge's git dir ${target.gitDir}` }];
  }

  async function nestedRepositories(worktreeDir: string): Promise<WorktreeIntegrityProblem[]> {
    const found: WorktreeIntegrityProblem[] = [];
    const queue: string[] = [''];
    let seen = 0;
    while (queue.length > 0 && seen < 500_000) {
      const rel = queue.shift()!;
      const entries = await readdir(path.join(worktreeDir, rel), { withFileTypes: true }).catch(() => []);
      for (const entry of entries) {
        seen++;
        const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
        if (entry.name === '.git') {
          if (rel !== '') found.push({ kind: 'nested-repository', path: child, detail: `the agent made a git repository at ${rel}/ (${child})` });
          continue;
        }
        // Links are never followed: what they point at is not part of the worktree.
        if (entry.isDirectory()) queue.push(child);
      }
    }
    return found;
  }

  async function inspect(worktreeDirInput: string, inspectOptions: { nested?: boolean } = {}): Promise<WorktreeIntegrityProblem[]> {
    const worktreeDir = await canonical(worktreeDirInput);
    let target: HardenedGitTarget;
    try {
      target = await expectedGitDir(worktreeDir);
    } catch (error) {
      return [{ kind: 'git-file', path: '.git', detail: (error as Error).message }];
    }
    const problems = await gitFileProblems(worktreeDir, target);
    const commonDir = path.dirname(path.dirname(target.gitDir));
    const before = fingerprints.get(target.gitDir);
    if (before !== undefined && before !== (await fingerprint(target.gitDir, commonDir))) {
      problems.push({ kind: 'git-dir', path: target.gitDir, detail: `the configuration or hooks of the git dir ${target.gitDir} changed while the loop ran` });
    }
    for (const [file, why] of [[path.join(target.gitDir, 'hooks'), 'a hooks folder'], [path.join(target.gitDir, 'config.worktree'), 'a worktree configuration']] as const) {
      if (before === undefined && (await lstat(file).then(() => true, () => false))) problems.push({ kind: 'git-dir', path: file, detail: `the git dir ${target.gitDir} has ${why} git did not make` });
    }
    if (inspectOptions.nested !== false) problems.push(...(await nestedRepositories(worktreeDir)));
    return problems;
  }

  async function restoreGitFile(worktreeDirInput: string): Promise<WorktreeIntegrityProblem[]> {
    const worktreeDir = await canonical(worktreeDirInput);
    const target = await expectedGitDir(worktreeDir);
    const problems = await gitFileProblems(worktreeDir, target);
    if (problems.length > 0) {
      // Only a git dir that still belongs to this worktree is written back into its .git file.
      const back = await readSmall(path.join(target.gitDir, 'gitdir'));
      if (back === null || path.resolve(target.gitDir, back.trim()) !== path.join(worktreeDir, '.git')) {
        targets.delete(worktreeDir);
        throw new WorkspaceError('worktree_mismatch', `Forge will not run git in ${worktreeDir}: ${problems[0]!.detail}, and its git dir ${target.gitDir} no longer belongs to it. Remove the worktree; Forge recreates it from its branch.`);
      }
      const file = path.join(worktreeDir, '.git');
      const st = await lstat(file).catch(() => null);
      if (st && !st.isFile()) await rm(file, { recursive: true, force: true });
      // In place (same inode): the sandbox's read-only mount of the file shows the content too.
      await writeFile(file, gitFileContent(target.gitDir));
    }
    return problems;
  }

  return { register, targetFor, inspect, restoreGitFile };
}

/** Removes an agent-made repository's `.git` (file or folder) at `relPath` inside `worktreeDir`. */
export async function removeNestedRepository(worktreeDir: string, relPath: string): Promise<void> {
  const target = path.resolve(worktreeDir, relPath);
  if (!isInside(worktreeDir, target) || path.basename(target) !== '.git' || path.dirname(target) === worktreeDir) {
    throw new WorkspaceError('worktree_mismatch', `Forge refuses to remove ${target}: not a nested repository of ${worktreeDir}.`);
  }
  await rm(target, { recursive: true, force: true });
}
