/**
 * The worktree service: loop worktrees created, restored, committed in and removed. Its parts
 * live beside it: merging into the base branch (merge-into-base.ts), git's output parsed
 * (git-output.ts), read-only git questions (git-queries.ts), path checks (workspace-paths.ts)
 * and its types and constants (worktree-types.ts).
 */
import { lstat, mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ensureDataDir } from './data-dir';
import { createDeliveredWork } from './delivered-work';
import { createGitRunner, type GitRunner } from './git-runner';
import { createWorktreeGitDirs, removeNestedRepository, type WorktreeIntegrityProblem } from './worktree-git-dirs';
import { sweepMergeScratch } from './merge-scratch';
import { isLoopName } from './loop-name';
import { canonicalPath, inspectRepository, type InspectRepositoryOptions, type RepositoryInfo } from './repository';
import { WorkspaceError } from './workspace-error';
import { stagedFromNameStatus, type StagedChanges } from './checkpoint-message';
import { firstLine, parseNameStatus } from './git-output';
import { branchCommit, branchCommits, identityConfig, listWorktrees } from './git-queries';
import { isInside, pathExists } from './workspace-paths';
import { createIntegrationMerges } from './merge-integration';
import { createMergeIntoBase } from './merge-into-base';
import {
  DEFAULT_ARTEFACT_DIRS,
  FORGE_COMMIT_IDENTITY,
  LOOP_BRANCH_PREFIX,
  type ChangedFile,
  type CommitAllOptions,
  type CreateWorktreeRequest,
  type EnsureWorktreeResult,
  type LoopWorktree,
  type WorktreeServiceOptions,
} from './worktree-types';

/** The service's types and constants live in worktree-types.ts; Forge imports them from here. */
export * from './worktree-types';

/**
 * Git worktrees for loops, in Forge's data folder, on `forge/<loop-name>`
 * branches. Forge never writes into the user's own working tree except through
 * a merge the user asked for, and never deletes a loop branch.
 */
export function createWorktreeService(options: WorktreeServiceOptions) {
  const { log } = options;
  const identity = options.identity ?? FORGE_COMMIT_IDENTITY;
  const artefactDirs = options.artefactDirs ?? DEFAULT_ARTEFACT_DIRS;
  const dataDir = path.resolve(options.dataDir);
  let worktreesRootPromise: Promise<string> | null = null;
  /**
   * Loop worktrees are hostile input (issue 26): every git command on one names the git dir
   * Forge made for it and runs with git's command-running settings off (git-hardening.ts).
   * Folders of the user's (the repository, its checkout) get git as the user runs it.
   */
  // The worktrees folder's path, without creating the data folder (a read-only inspection must not).
  const loopWorktreesRoot = () => worktreesRootPromise ?? canonicalPath(path.join(dataDir, 'worktrees'));
  const gitDirs = createWorktreeGitDirs({ loopWorktreesRoot, ...(options.gitEnv ? { env: options.gitEnv } : {}) });
  const git: GitRunner = createGitRunner({ ...(options.gitEnv ? { env: options.gitEnv } : {}), worktreeTarget: gitDirs.targetFor });

  /** `<dataDir>/worktrees`, created and checked writable once per service. */
  function worktreesRoot(): Promise<string> {
    if (worktreesRootPromise === null) {
      const pending = (async () => {
        await ensureDataDir(dataDir);
        return canonicalPath(path.join(dataDir, 'worktrees'));
      })();
      worktreesRootPromise = pending;
      // A failure (e.g. an unwritable folder the user then fixes) is retried on the next call.
      pending.catch(() => {
        if (worktreesRootPromise === pending) worktreesRootPromise = null;
      });
    }
    return worktreesRootPromise;
  }

  /** Refuses any folder that is not directly inside `<dataDir>/worktrees/`. */
  async function assertLoopFolder(dir: string): Promise<string> {
    const root = await worktreesRoot();
    const resolved = await canonicalPath(dir);
    const relative = path.relative(root, resolved);
    if (!isInside(root, resolved) || relative.includes(path.sep) || relative.includes('/')) {
      throw new WorkspaceError(
        'worktree_outside_data_dir',
        `Refusing to use ${dir}: Forge only works in loop worktrees directly inside ${root}. This guards your own working tree; pass the loop's worktree folder.`,
      );
    }
    return resolved;
  }

  // Per worktree, for the service's lifetime: HEAD's tracking of artefact folders cannot change
  // (commits leave untracked artefact folders out), and an identity is read once per loop.
  const untrackedArtefactCache = new Map<string, Promise<string[]>>();
  const identityCache = new Map<string, Promise<string[]>>();
  function untrackedArtefactDirsOf(worktreeDir: string): Promise<string[]> {
    return cachedPromise(untrackedArtefactCache, worktreeDir, () => untrackedArtefactDirs(worktreeDir));
  }
  /** `-- . :(exclude)<artefact>…`: the loop's own work in a worktree, without its untracked artefact folders. */
  async function ownWorkPathspec(worktreeDir: string): Promise<string[]> {
    return ['--', '.', ...(await untrackedArtefactDirsOf(worktreeDir)).map((dir) => `:(exclude)${dir}`)];
  }
  function identityConfigOf(worktreeDir: string): Promise<string[]> {
    return cachedPromise(identityCache, worktreeDir, () => identityConfig(git, worktreeDir, identity));
  }

  /** Artefact folders the worktree's HEAD does not track (those are the ones kept out of commits). */
  async function untrackedArtefactDirs(worktreeDir: string): Promise<string[]> {
    const untracked: string[] = [];
    // One listing of HEAD's top level instead of one ls-tree per folder.
    const topLevel = new Set((await git.ok(worktreeDir, ['ls-tree', '--name-only', '-z', 'HEAD'])).split('\0'));
    for (const dir of artefactDirs) {
      const tracked = dir.includes('/') ? (await git.ok(worktreeDir, ['ls-tree', '--name-only', 'HEAD', '--', dir])).trim() !== '' : topLevel.has(dir);
      if (!tracked) untracked.push(dir);
    }
    return untracked;
  }

  /**
   * Keeps artefact folders out of `git status` and commits in this worktree
   * without touching the user's `.gitignore`. `--git-path info/exclude` of a
   * linked worktree resolves into the shared `.git/info/exclude` (git ≤ 2.4x),
   * so writing there would change ignores in the user's own working tree too.
   * When git gives the worktree a private exclude file, the rules go there;
   * otherwise each untracked artefact folder that already exists (a worktree
   * recreated over an old folder) gets a self-ignoring `.gitignore` (`*`), which
   * stays local to the worktree and is never committed.
   * `commitAll` also excludes these folders by pathspec.
   */
  async function installArtefactIgnores(worktreeDir: string): Promise<void> {
    const dirs = await untrackedArtefactDirsOf(worktreeDir);
    if (dirs.length === 0) return;
    const [gitDirOutput = '', excludeOutput = ''] = (await git.ok(worktreeDir, ['rev-parse', '--absolute-git-dir', '--git-path', 'info/exclude'])).split(/\r?\n/);
    const ownGitDir = await canonicalPath(gitDirOutput);
    const excludePath = await canonicalPath(path.resolve(worktreeDir, excludeOutput));

    if (isInside(ownGitDir, excludePath)) {
      const existing = (await pathExists(excludePath)) ? await readFile(excludePath, 'utf8') : '';
      const rules = dirs.map((dir) => `/${dir}/`).join('\n');
      await mkdir(path.dirname(excludePath), { recursive: true });
      await writeFile(excludePath, `${existing}${existing === '' || existing.endsWith('\n') ? '' : '\n'}# Forge: loop artefacts\n${rules}\n`);
      log.debug(`workspace: excluded ${dirs.join(', ')} through ${excludePath}`);
      return;
    }
    for (const dir of dirs) {
      // Never create the folder: opencode treats every `.opencode/` it finds as a config folder
      // and installs `@opencode-ai/plugin` into it from the npm registry, a download per loop
      // that also holds opencode's shutdown for seconds. A folder opencode creates itself gets
      // opencode's own `.gitignore`, and commitAll keeps the folder out of commits regardless.
      if (!(await pathExists(path.join(worktreeDir, dir)))) continue;
      const ignoreFile = path.join(worktreeDir, dir, '.gitignore');
      if (await pathExists(ignoreFile)) continue;
      await mkdir(path.dirname(ignoreFile), { recursive: true });
      await writeFile(ignoreFile, '# Written by Forge: this folder holds opencode/Forge working files, kept out of the loop\'s commits.\n*\n');
    }
    log.debug(`workspace: ${excludePath} is shared with the main working tree; ignored ${dirs.join(', ')} with self-ignoring .gitignore files`);
  }

  function assertLoopName(loopName: string): void {
    if (!isLoopName(loopName)) {
      throw new WorkspaceError(
        'invalid_loop_name',
        `"${loopName}" is not a valid loop name (lower-case letters, digits and single dashes, at most 48 characters). Derive names with slugifyLoopName or validateLoopName.`,
      );
    }
  }

  /** `<dataDir>/worktrees/<loop-name>`, resolved and proven to be inside the worktrees folder. */
  async function worktreeDirFor(loopName: string): Promise<string> {
    assertLoopName(loopName);
    const root = await worktreesRoot();
    const dir = path.resolve(root, loopName);
    if (!isInside(root, dir) || path.dirname(dir) !== root) {
      throw new WorkspaceError('worktree_outside_data_dir', `The worktree for "${loopName}" would be ${dir}, outside ${root}. Choose another loop name.`);
    }
    return dir;
  }

  /**
   * Frees `branch` from a registration whose folder no longer exists (so git
   * would refuse to check it out again), and refuses when it is checked out in
   * a live working tree. Drops only that one registration: `git worktree prune`
   * would also drop the user's worktrees that sit on an unmounted drive.
   */
  async function releaseStaleCheckout(repoDir: string, branch: string, worktreeDir: string): Promise<void> {
    const registered = (await listWorktrees(git, repoDir)).find((entry) => entry.branch === `refs/heads/${branch}`);
    if (!registered) return;
    const registeredPath = await canonicalPath(registered.path);
    if (registered.prunable || !(await pathExists(registeredPath))) {
      await git.ok(repoDir, ['worktree', 'remove', '--force', registered.path]);
      log.debug(`workspace: dropped the stale worktree registration ${registered.path} of ${branch}`);
      return;
    }
    throw new WorkspaceError(
      'branch_checked_out',
      `The branch ${branch} is checked out in ${registered.path}, so Forge cannot check it out in ${worktreeDir}. Switch that working tree to another branch and try again.`,
    );
  }

  /**
   * `git worktree add` one at a time per repository: two at once can make git read the other's
   * half-written `.git/worktrees/<name>/commondir` and fail ("failed to read … commondir"),
   * seen when loops of one repository start together.
   */
  const worktreeAdds = new Map<string, Promise<unknown>>();
  function oneAddAtATime<T>(repoDir: string, fn: () => Promise<T>): Promise<T> {
    const previous = worktreeAdds.get(repoDir) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const settled = next.catch(() => undefined);
    worktreeAdds.set(repoDir, settled);
    void settled.then(() => {
      if (worktreeAdds.get(repoDir) === settled) worktreeAdds.delete(repoDir);
    });
    return next;
  }

  async function addWorktree(repoDir: string, args: string[], worktreeDir: string, branch: string): Promise<void> {
    const result = await oneAddAtATime(repoDir, () => git.run(repoDir, ['worktree', 'add', ...args]));
    if (result.exitCode === 0) return;
    const detail = result.stderr.trim().replace(/\s+/g, ' ');
    if (/already checked out|is already used by worktree|already used by worktree/i.test(detail)) {
      throw new WorkspaceError(
        'branch_checked_out',
        `The branch ${branch} is checked out in another working tree, so Forge cannot check it out in ${worktreeDir}. Switch that working tree to another branch and try again. (git: ${detail})`,
      );
    }
    throw new WorkspaceError('worktree_add_failed', `git could not create the worktree ${worktreeDir} on ${branch}: ${detail}`);
  }

  /**
   * Creates `<dataDir>/worktrees/<loop-name>` on a new branch `forge/<loop-name>`
   * from the current HEAD (or `baseCommit`). Checks the repository first and
   * refuses a leftover branch at another commit or an existing folder.
   */
  async function createWorktree(request: CreateWorktreeRequest): Promise<LoopWorktree> {
    const { loopName } = request;
    assertLoopName(loopName);
    const repo: RepositoryInfo = request.repository ?? (await inspectRepository(git, request.repoPath));
    const worktreeDir = await worktreeDirFor(loopName);
    const root = path.dirname(worktreeDir);
    const branch = `${LOOP_BRANCH_PREFIX}${loopName}`;

    if (isInside(repo.repoDir, root) || root === repo.repoDir) {
      throw new WorkspaceError(
        'worktree_inside_repository',
        `Forge's worktree folder ${root} is inside the repository ${repo.repoDir}; loop worktrees must live outside your working tree. Set FORGE_DATA_DIR to a folder outside the repository.`,
      );
    }

    let baseCommit = repo.headCommit;
    if (request.baseCommit !== undefined) {
      const pinned = request.baseCommit.startsWith('-')
        ? ''
        : firstLine((await git.run(repo.repoDir, ['rev-parse', '--verify', '-q', `${request.baseCommit}^{commit}`])).stdout);
      if (pinned === '') {
        throw new WorkspaceError(
          'invalid_base_commit',
          `"${request.baseCommit}" is not a commit in ${repo.repoDir}. Pass a commit sha, branch or tag that exists there, or leave the base commit out to start from HEAD.`,
        );
      }
      baseCommit = pinned;
    }

    if (await pathExists(worktreeDir)) {
      throw new WorkspaceError(
        'worktree_path_exists',
        `The folder ${worktreeDir} already exists, so Forge cannot create the worktree for loop "${loopName}" there. Choose another loop name, or remove that folder if it is a leftover (git worktree remove ${worktreeDir}).`,
      );
    }

    const tips = await branchCommits(git, repo.repoDir, ['forge', branch]);
    if (tips.has('forge')) {
      throw new WorkspaceError(
        'branch_namespace_taken',
        `The repository has a branch named "forge", which stops git from creating loop branches named forge/<name>. Rename it (git branch -m forge forge-old) and try again.`,
      );
    }

    const existingBranchCommit = tips.get(branch) ?? null;
    if (existingBranchCommit !== null && existingBranchCommit !== baseCommit) {
      throw new WorkspaceError(
        'branch_exists',
        `A branch ${branch} already exists at ${existingBranchCommit.slice(0, 12)}, not at the loop's start commit ${baseCommit.slice(0, 12)}; Forge never reuses it. Choose another loop name, or rename or delete that branch yourself (git branch -m ${branch} ${branch}-old).`,
      );
    }

    await mkdir(root, { recursive: true });
    if (existingBranchCommit !== null) {
      await releaseStaleCheckout(repo.repoDir, branch, worktreeDir);
      await addWorktree(repo.repoDir, [worktreeDir, branch], worktreeDir, branch);
      log.info(`workspace: reused branch ${branch} (already at ${baseCommit.slice(0, 12)}) for ${worktreeDir}`);
    } else {
      await addWorktree(repo.repoDir, ['-b', branch, worktreeDir, baseCommit], worktreeDir, branch);
      log.info(`workspace: created ${worktreeDir} on ${branch} from ${baseCommit.slice(0, 12)}`);
    }

    try {
      await gitDirs.register(worktreeDir, repo.gitCommonDir);
      await installArtefactIgnores(worktreeDir);
    } catch (error) {
      // Roll back the folder; the branch stays (it is at the start commit with no work, so it is reusable).
      await git.run(repo.repoDir, ['worktree', 'remove', '--force', worktreeDir]);
      throw error;
    }

    return {
      loopName,
      worktreeDir: await canonicalPath(worktreeDir),
      branch,
      baseBranch: repo.currentBranch,
      baseCommit,
      repoDir: repo.repoDir,
      gitCommonDir: repo.gitCommonDir,
    };
  }

  /**
   * Restart support: a loop's worktree is fine when it exists and is on its
   * branch; when only the branch survived, the worktree is recreated from it;
   * when both are gone, `missing_worktree`.
   */
  async function ensureWorktree(loop: Pick<LoopWorktree, 'worktreeDir' | 'branch' | 'repoDir'>): Promise<EnsureWorktreeResult> {
    const worktreeDir = await assertLoopFolder(loop.worktreeDir);
    const { branch } = loop;

    if (await pathExists(worktreeDir)) {
      // The repository's own common dir names Forge's git dir for the worktree; a `.git` file
      // the agent rewrote is put back (the loop's next commit records what it did).
      const commonDir = await canonicalPath(path.resolve(loop.repoDir, firstLine(await git.ok(loop.repoDir, ['rev-parse', '--git-common-dir']))));
      await gitDirs.register(worktreeDir, commonDir).catch((error: unknown) => {
        throw new WorkspaceError(
          'worktree_mismatch',
          `${worktreeDir} exists but is not a working git worktree of ${loop.repoDir} (none, or one of another repository). If the repository was moved, run "git worktree repair ${worktreeDir}" in it; otherwise move the folder away (Forge then recreates the worktree from ${branch}) and restart the loop.`,
          { cause: error },
        );
      });
      const restored = await gitDirs.restoreGitFile(worktreeDir);
      for (const p of restored) log.warn(`workspace: ${worktreeDir}: ${p.detail}; Forge put it back`);
      const top = await git.run(worktreeDir, ['rev-parse', '--show-toplevel']);
      if (top.exitCode !== 0 || (await canonicalPath(firstLine(top.stdout))) !== worktreeDir) {
        throw new WorkspaceError(
          'worktree_mismatch',
          `${worktreeDir} exists but is not a working git worktree. If the repository was moved, run "git worktree repair ${worktreeDir}" in it; otherwise move the folder away (Forge then recreates the worktree from ${branch}) and restart the loop.`,
        );
      }
      const repoCommon = firstLine(await git.ok(loop.repoDir, ['rev-parse', '--git-common-dir']));
      const ownCommon = firstLine(await git.ok(worktreeDir, ['rev-parse', '--git-common-dir']));
      if ((await canonicalPath(path.resolve(loop.repoDir, repoCommon))) !== (await canonicalPath(path.resolve(worktreeDir, ownCommon)))) {
        throw new WorkspaceError(
          'worktree_mismatch',
          `${worktreeDir} is a worktree of another repository than ${loop.repoDir}. Move it away and restart the loop.`,
        );
      }
      const head = firstLine((await git.run(worktreeDir, ['symbolic-ref', '-q', 'HEAD'])).stdout);
      if (head !== `refs/heads/${branch}`) {
        const where = head === '' ? 'a detached HEAD' : head.replace(/^refs\/heads\//, 'branch ');
        throw new WorkspaceError(
          'worktree_mismatch',
          `The loop's worktree ${worktreeDir} is on ${where}, not on ${branch}. Switch it back (git -C ${worktreeDir} switch ${branch}) and restart the loop.`,
        );
      }
      return { status: 'present', worktreeDir };
    }

    if (!(await pathExists(loop.repoDir))) {
      throw new WorkspaceError(
        'missing_worktree',
        `The loop's worktree ${worktreeDir} is gone and so is its repository ${loop.repoDir}; Forge cannot restart this loop. Start a new loop.`,
      );
    }
    const tip = await branchCommit(git, loop.repoDir, branch);
    if (tip === null) {
      throw new WorkspaceError(
        'missing_worktree',
        `The loop's worktree ${worktreeDir} and its branch ${branch} are both gone, so its work cannot be restored. Start a new loop from the plan.`,
      );
    }

    await releaseStaleCheckout(loop.repoDir, branch, worktreeDir);

    await mkdir(path.dirname(worktreeDir), { recursive: true });
    await addWorktree(loop.repoDir, [worktreeDir, branch], worktreeDir, branch);
    const commonDir = await canonicalPath(path.resolve(loop.repoDir, firstLine(await git.ok(loop.repoDir, ['rev-parse', '--git-common-dir']))));
    await gitDirs.register(worktreeDir, commonDir);
    await installArtefactIgnores(worktreeDir);
    log.info(`workspace: recreated ${worktreeDir} from ${branch} at ${tip.slice(0, 12)}`);
    return { status: 'recreated', worktreeDir };
  }

  /**
   * Stages everything in a loop worktree (respecting ignores, leaving out
   * artefact folders) and commits it. Returns the new commit's sha, or null
   * when there was nothing to commit. `likelyClean` (a loop's last commit, often after a
   * checkpoint that took everything): ask git's status first, one process when it is clean.
   * `message` may be written from what the commit holds (checkpoint-message.ts): one more git
   * process (diff --cached) names its paths.
   */
  async function commitAll(worktreeDirInput: string, messageOrWriter: string | ((changes: StagedChanges) => string), options: CommitAllOptions = {}): Promise<string | null> {
    const worktreeDir = await assertLoopFolder(worktreeDirInput);
    if (!(await pathExists(worktreeDir))) {
      throw new WorkspaceError('missing_worktree', `The loop's worktree ${worktreeDir} is gone; there is nothing to commit. Restart the loop to recreate it from its branch.`);
    }
    if (typeof messageOrWriter === 'string' && messageOrWriter.trim() === '') throw new WorkspaceError('commit_failed', 'Forge was asked to commit with an empty message; this is a bug in the caller.');

    // Checkpoints sit between two agent sessions, so every git process here delays the next
    // prompt: the common case is two, add and commit.
    const agentChanges = await gitDirs.restoreGitFile(worktreeDir);
    const report = () => {
      if (agentChanges.length === 0) return;
      for (const p of agentChanges) log.warn(`workspace: ${worktreeDir}: ${p.detail}`);
      options.onAgentGitChanges?.(agentChanges);
    };
    const pathspec = await ownWorkPathspec(worktreeDir);
    if (options.likelyClean) {
      // Porcelain v2 with --branch prints its branch headers first; anything after them is a
      // change, staged, unstaged or untracked.
      const status = await git.ok(worktreeDir, ['status', '--porcelain=v2', '--branch', '-z', '--untracked-files=all', ...pathspec]);
      if (!status.split('\0').some((entry) => entry !== '' && !entry.startsWith('# '))) {
        log.debug(`workspace: nothing to commit in ${worktreeDir}`);
        report();
        return null;
      }
    }
    // --verbose lists what it staged: nothing listed is nothing new from the working tree.
    const added = await addWithoutEmbeddedRepositories(worktreeDir, pathspec, agentChanges);
    report();
    if (added.trim() === '') {
      // Nothing new from the working tree; an agent may still have staged something itself.
      // (--dry-run answers by exit code.)
      let dryRun = await git.run(worktreeDir, ['commit', '--dry-run', ...pathspec]);
      // A merge in progress (the agent staged its resolution itself): git asks about the whole merge.
      if (dryRun.exitCode !== 0 && /partial commit during a merge/.test(dryRun.stderr)) dryRun = await git.run(worktreeDir, ['commit', '--dry-run']);
      if (dryRun.exitCode !== 0) {
        log.debug(`workspace: nothing to commit in ${worktreeDir}`);
        return null;
      }
    }
    let message: string;
    if (typeof messageOrWriter === 'string') message = messageOrWriter;
    else {
      // The index, not add's list: an agent may have staged (git rm, git mv) before this add.
      const staged = stagedFromNameStatus(parseNameStatus(await git.ok(worktreeDir, ['diff', '--cached', '--name-status', '-z', '--no-renames', ...pathspec])));
      message = messageOrWriter(staged);
      if (message.trim() === '') throw new WorkspaceError('commit_failed', 'Forge was asked to commit with an empty message; this is a bug in the caller.');
    }
    // No automatic `git maintenance` after a checkpoint (git starts one from every commit): it
    // would hold up the next prompt; the user's own next commit in the repository runs it.
    const config = [...(await identityConfigOf(worktreeDir)), 'core.abbrev=40', 'maintenance.auto=false'];
    // The pathspec makes this a commit of those paths only: artefacts an agent staged by hand
    // (HEAD does not track them) stay out of it.
    let result = await git.run(worktreeDir, ['commit', '--no-status', '-m', message, ...pathspec], { config });
    if (result.exitCode !== 0 && /partial commit during a merge/.test(result.stderr)) {
      // A merge is in progress (a group's merge queue started it for the coder to resolve,
      // merge-integration.ts): git commits a merge whole, and this commit completes it.
      result = await git.run(worktreeDir, ['commit', '--no-status', '-m', message], { config });
    }
    if (result.exitCode === 1 && /nothing (added )?to commit|no changes added to commit/.test(result.stdout)) {
      log.debug(`workspace: nothing to commit in ${worktreeDir}`);
      return null;
    }
    if (result.exitCode !== 0) {
      const detail = (result.stderr.trim() || result.stdout.trim()).replace(/\s+/g, ' ');
      throw new WorkspaceError(
        'commit_failed',
        `Forge could not commit in ${worktreeDir}: ${detail || `git exited with ${result.exitCode}`}. The changes stay staged in the worktree.`,
      );
    }
    // git's summary line, "[branch <sha>] subject", carries the full sha with core.abbrev=40.
    const sha = /^\[[^\n]*?\b([0-9a-f]{40})\]/m.exec(result.stdout)?.[1] ?? firstLine(await git.ok(worktreeDir, ['rev-parse', 'HEAD']));
    log.info(`workspace: committed ${sha.slice(0, 12)} in ${worktreeDir}: ${firstLine(message)}`);
    return sha;
  }

  /**
   * `git add -A`, and never an agent-made repository as a gitlink: a folder git staged whole
   * (a repository inside the worktree) is unstaged, its `.git` removed and its files staged as
   * files; each becomes an entry of `changes`. Returns git's list of what it staged.
   */
  async function addWithoutEmbeddedRepositories(worktreeDir: string, pathspec: string[], changes: WorktreeIntegrityProblem[]): Promise<string> {
    let listed = await git.ok(worktreeDir, ['add', '-A', '--verbose', ...pathspec]);
    let all = listed;
    // A repository inside a repository the agent made: one round per level, a few at most.
    for (let round = 0; round < 8; round++) {
      const gitlinks: string[] = [];
      for (const line of listed.split('\n')) {
        // git lists a repository it staged as a gitlink with a trailing slash: `add 'sub/'`.
        const rel = /^add '(.*)'$/.exec(line)?.[1]?.replace(/\/+$/, '');
        if (rel === undefined || rel === '') continue;
        const st = await lstat(path.join(worktreeDir, rel)).catch(() => null);
        if (st?.isDirectory()) gitlinks.push(rel);
      }
      if (gitlinks.length === 0) return all;
      for (const rel of gitlinks) {
        await git.ok(worktreeDir, ['rm', '--cached', '-f', '-q', '--', rel]);
        await removeNestedRepository(worktreeDir, `${rel}/.git`);
        changes.push({ kind: 'nested-repository', path: rel, detail: `the agent made a git repository at ${rel}/; Forge removed its .git and commits its files as plain files` });
      }
      listed = await git.ok(worktreeDir, ['add', '-A', '--verbose', '--', ...gitlinks]);
      all += listed;
    }
    throw new WorkspaceError('commit_failed', `Forge could not commit in ${worktreeDir}: it holds repositories nested more than 8 deep. Remove the .git folders below the worktree and try again.`);
  }

  /**
   * Moves the worktree's branch back from `sha` to its parent, only if the branch is still at
   * `sha`; the index keeps that commit's content, so its changes stay staged. False when the
   * branch had moved on.
   */
  async function undoLastCommit(worktreeDirInput: string, sha: string): Promise<boolean> {
    const worktreeDir = await assertLoopFolder(worktreeDirInput);
    const result = await git.run(worktreeDir, ['update-ref', '-m', 'forge: take back a checkpoint', 'HEAD', `${sha}^`, sha]);
    if (result.exitCode === 0) log.info(`workspace: took back ${sha.slice(0, 12)} in ${worktreeDir} (its changes stay staged)`);
    return result.exitCode === 0;
  }

  /** Brings the loop's work into the branch it started from, as configured (merge-into-base.ts). */
  const mergeIntoBase = createMergeIntoBase({ git, log, identity, worktreesRoot });
  /** A feature group's integration branch and its merge queue's git steps (merge-integration.ts). */
  const integration = createIntegrationMerges({ git, log, identity, worktreesRoot });

  /**
   * Opt-in cleanup: removes a loop worktree folder and its registration; the
   * branch stays. Refuses when the worktree holds uncommitted work.
   */
  async function removeWorktree(worktreeDirInput: string): Promise<void> {
    const worktreeDir = await assertLoopFolder(worktreeDirInput);
    if (!(await pathExists(worktreeDir))) {
      log.debug(`workspace: ${worktreeDir} is already gone`);
      return;
    }
    const top = await git.run(worktreeDir, ['rev-parse', '--show-toplevel']);
    if (top.exitCode !== 0 || (await canonicalPath(firstLine(top.stdout))) !== worktreeDir) {
      throw new WorkspaceError('worktree_mismatch', `${worktreeDir} is not a git worktree, so Forge leaves it alone. Remove it yourself if you no longer need it.`);
    }
    // Dirty means work of the loop's own: artefact folders (opencode's plugin install and the
    // like) are left out of commits, so they do not keep a worktree alive either.
    const dirty = await git.ok(worktreeDir, ['status', '--porcelain', '-z', ...(await ownWorkPathspec(worktreeDir))]);
    if (dirty !== '') {
      throw new WorkspaceError(
        'worktree_dirty',
        `The worktree ${worktreeDir} has uncommitted changes, so Forge keeps it. Commit them, or remove it yourself (git worktree remove --force ${worktreeDir}).`,
      );
    }
    const result = await git.run(worktreeDir, ['worktree', 'remove', '--force', worktreeDir]);
    if (result.exitCode !== 0) {
      throw new WorkspaceError('git_failed', `git could not remove the worktree ${worktreeDir}: ${result.stderr.trim().replace(/\s+/g, ' ')}`);
    }
    log.info(`workspace: removed ${worktreeDir} (its branch is kept)`);
  }

  /**
   * Deletes a loop's branch (`forge accept --remove`, after its worktree is gone). Only a
   * `forge/` branch, never one checked out anywhere (git refuses that itself).
   */
  async function deleteLoopBranch(repoDir: string, branch: string): Promise<void> {
    if (!branch.startsWith(LOOP_BRANCH_PREFIX)) throw new WorkspaceError('git_failed', `${branch} is not a loop branch (${LOOP_BRANCH_PREFIX}…), so Forge does not delete it.`);
    const result = await git.run(repoDir, ['branch', '-D', '--', branch]);
    if (result.exitCode !== 0) throw new WorkspaceError('git_failed', `git could not delete the branch ${branch}: ${result.stderr.trim().replace(/\s+/g, ' ')}`);
    log.info(`workspace: deleted the branch ${branch}`);
  }

  /**
   * The files the loop changed, as `git diff --name-status <baseCommit>...<branch>`
   * (committed work only; with `includeUncommitted`, the worktree's uncommitted
   * and untracked files too).
   */
  async function diffAgainstBase(
    loop: Pick<LoopWorktree, 'repoDir' | 'branch' | 'baseCommit'> & { worktreeDir?: string },
    options: { includeUncommitted?: boolean } = {},
  ): Promise<ChangedFile[]> {
    if (!options.includeUncommitted) {
      const output = await git.ok(loop.repoDir, ['diff', '--name-status', '-z', '-M', `${loop.baseCommit}...refs/heads/${loop.branch}`, '--']);
      return parseNameStatus(output);
    }
    if (loop.worktreeDir === undefined) {
      throw new WorkspaceError('missing_worktree', 'Listing uncommitted changes needs the loop\'s worktree folder; none was given.');
    }
    const worktreeDir = await assertLoopFolder(loop.worktreeDir);
    const tracked = parseNameStatus(await git.ok(worktreeDir, ['diff', '--name-status', '-z', '-M', loop.baseCommit, '--']));
    const untracked = (await git.ok(worktreeDir, ['ls-files', '--others', '--exclude-standard', '-z', ...(await ownWorkPathspec(worktreeDir))]))
      .split('\0')
      .filter(Boolean)
      .map((file): ChangedFile => ({ status: 'A', path: file }));
    return [...tracked, ...untracked].sort((a, b) => a.path.localeCompare(b.path));
  }

  /**
   * The invariants that make handing the worktree to git (VS Code's, a check's, a merge's)
   * safe: its `.git` file names Forge's git dir, no repository of the agent's is inside it, the
   * git dir's configuration and hooks are as Forge first saw them. Changes nothing; each
   * problem is one sentence. With `repoDir`, the git dir is the one that repository made.
   */
  async function verifyWorktree(worktreeDirInput: string, repoDir?: string): Promise<WorktreeIntegrityProblem[]> {
    const worktreeDir = await assertLoopFolder(worktreeDirInput);
    if (repoDir !== undefined) {
      const commonDir = await canonicalPath(path.resolve(repoDir, firstLine(await git.ok(repoDir, ['rev-parse', '--git-common-dir']))));
      try {
        await gitDirs.register(worktreeDir, commonDir);
      } catch (error) {
        return [{ kind: 'git-file', path: '.git', detail: (error as Error).message }];
      }
    }
    return gitDirs.inspect(worktreeDir);
  }

  /** A file's content at the loop's base commit, or null when it did not exist there (for the diff editor). */
  async function readFileAtBase(loop: Pick<LoopWorktree, 'repoDir' | 'baseCommit'>, relativePath: string): Promise<string | null> {
    const gitPath = relativePath.split(path.sep).join('/');
    const result = await git.run(loop.repoDir, ['cat-file', 'blob', `${loop.baseCommit}:${gitPath}`]);
    return result.exitCode === 0 ? result.stdout : null;
  }

  /** What the loop's next commit would hold, for the verification gate (delivered-work.ts). */
  const { deliveredWork, changedSince, textAt } = createDeliveredWork({
    git,
    worktreesRoot,
    stage: async (dir, onAgentGitChanges) => {
      const worktreeDir = await assertLoopFolder(dir);
      const changes = await gitDirs.restoreGitFile(worktreeDir);
      try {
        await addWithoutEmbeddedRepositories(worktreeDir, await ownWorkPathspec(worktreeDir), changes);
      } finally {
        for (const p of changes) log.warn(`workspace: ${worktreeDir}: ${p.detail}`);
        if (changes.length > 0) onAgentGitChanges?.(changes);
      }
    },
    identityConfig: identityConfigOf,
  });

  return {
    dataDir,
    /** Start-up cleanup: merge worktrees of dead processes, registered in `repoDirs` or not (merge-scratch.ts). */
    // The root as it is: no merge worktree can exist where the folder does not (and ensureDataDir's durable writes cost ~0.5 s under load).
    sweepMergeScratch: async (repoDirs: readonly string[]) => {
      const root = await realpath(path.join(dataDir, 'worktrees')).catch(() => null);
      return root ? sweepMergeScratch(git, root, repoDirs) : [];
    },
    worktreeDirFor,
    deliveredWork,
    changedSince,
    textAt,
    inspectRepository: (repoPath: string, inspect?: InspectRepositoryOptions) => inspectRepository(git, repoPath, inspect),
    createWorktree,
    ensureWorktree,
    commitAll,
    undoLastCommit,
    mergeIntoBase,
    integration,
    removeWorktree,
    deleteLoopBranch,
    diffAgainstBase,
    readFileAtBase,
    verifyWorktree,
  };
}

export type WorktreeService = ReturnType<typeof createWorktreeService>;

/** The cached promise for `key`, made by `make` on first use; a failed one is forgotten. */
function cachedPromise<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let hit = cache.get(key);
  if (!hit) {
    hit = make();
    cache.set(key, hit);
    hit.catch(() => cache.delete(key));
  }
  return hit;
}
