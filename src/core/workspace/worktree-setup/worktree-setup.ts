/**
 * A loop's worktree setup (issue 27), planned at its start from the base commit and the user's
 * checkout, kept in the loop's state, and turned into sandbox mounts for each sandbox that works
 * on the worktree (its setup, its sessions, its gate's checks).
 *
 * Dependency folders never live in the worktree: a reused folder is the checkout's, an installed
 * one a Forge-owned folder (`<dataDir>/worktree-deps/<loop>/<n>`); each is mounted at the
 * worktree's path, read-write only for the setup's installs, read-only for everything after.
 * The worktree holds just an empty mount point, which git does not see, so the gate's in-place
 * proof (delivered-work.ts) holds. An unconfined loop (no sandbox) gets links instead.
 */
import { lstat, mkdir, readdir, readFile, readlink, realpath, symlink } from 'node:fs/promises';
import path from 'node:path';
import type { GitRunner } from '../git-runner';
import {
  detectProjects,
  parseWorktreeConfig,
  planDependencies,
  setupCommands,
  type DependencyMode,
  type SetupCommand,
} from './setup-plan';
import { sha256, type CopiedFile } from './setup-files';

export interface PreparedFolder {
  /** Relative to the repository root. */
  folder: string;
  /** The host folder mounted there. */
  source: string;
  mode: 'reuse' | 'install';
  /** Also mounted at `source` itself (a Python environment names its own path). */
  alsoAtSource?: boolean;
}

/** What the loop's state keeps of its setup (key `worktreeSetup`). */
export interface WorktreeSetupState {
  status: 'pending' | 'done' | 'failed';
  /** The user's checkout the plan was made from. */
  checkoutDir: string;
  folders: PreparedFolder[];
  commands: SetupCommand[];
  /** `.worktreeinclude` as read at the start (the base commit's, else the checkout's). */
  includePatterns: string;
  /** Files copied into the worktree (the gate's proof ignores them while unchanged). */
  copied: CopiedFile[];
  /** Things said at planning (a bad .forge/worktree.json). */
  problems: string[];
  /** The last failure, for the setup_failed reason. */
  message?: string;
  durationMs?: number;
}

export const WORKTREE_SETUP_STATE_KEY = 'worktreeSetup';

export interface PlanSetupInput {
  git: GitRunner;
  /** The user's checkout (the loop's repository folder). */
  checkoutDir: string;
  baseCommit: string;
  /** Forge-owned folder for this loop's installed dependencies. */
  depsDir: string;
  mode: DependencyMode;
  settingCommands: readonly string[];
}

async function blobAt(git: GitRunner, cwd: string, commit: string, file: string): Promise<Buffer | null> {
  const r = await git.run(cwd, ['cat-file', 'blob', `${commit}:${file}`]);
  return r.exitCode === 0 ? Buffer.from(r.stdout, 'utf8') : null;
}

async function regularFileText(file: string): Promise<string | null> {
  const st = await lstat(file).catch(() => null);
  return st?.isFile() ? readFile(file, 'utf8') : null;
}

/** The plan of a loop's setup: nothing runs here; only git reads and stats of the user's checkout. */
export async function planWorktreeSetup(input: PlanSetupInput): Promise<WorktreeSetupState> {
  const { git, checkoutDir, baseCommit } = input;
  // The three reads are independent: at a loop's start they overlap (each is a git process).
  const [listing, configBlob, includeBlob] = await Promise.all([
    git.ok(checkoutDir, ['ls-tree', '-r', '-z', '--name-only', baseCommit]),
    blobAt(git, checkoutDir, baseCommit, '.forge/worktree.json'),
    blobAt(git, checkoutDir, baseCommit, '.worktreeinclude'),
  ]);
  const tracked = listing.split('\0').filter((p) => p !== '');
  const projects = detectProjects(tracked);
  const lockfiles = projects.flatMap((p) => p.lockfiles);
  const same = new Map<string, boolean>();
  await Promise.all(
    lockfiles.map(async (l) => {
      // Byte for byte: the base commit's blob id against the checkout file's, hashed without filters.
      const mine = (await lstat(path.join(checkoutDir, l)).catch(() => null))?.isFile() ?? false;
      const [base, here] = await Promise.all([
        git.run(checkoutDir, ['rev-parse', '--verify', '--quiet', `${baseCommit}:${l}`]),
        mine ? git.run(checkoutDir, ['hash-object', '--no-filters', '--', l]) : Promise.resolve(null),
      ]);
      same.set(l, base.exitCode === 0 && here !== null && here.exitCode === 0 && base.stdout.trim() === here.stdout.trim());
    }),
  );
  const installed = new Map<string, boolean>();
  for (const p of projects) {
    for (const f of p.folders) {
      const dir = path.join(checkoutDir, f);
      const st = await lstat(dir).catch(() => null);
      let ok = st?.isDirectory() ?? false;
      if (ok && p.installedMarker) ok = (await lstat(path.join(dir, p.installedMarker)).catch(() => null)) !== null;
      else if (ok) ok = (await readdir(dir).catch(() => [])).length > 0;
      installed.set(f, ok);
    }
  }
  const deps = planDependencies(projects, { sameLockfile: (l) => same.get(l) ?? false, installed: (f) => installed.get(f) ?? false }, input.mode);
  const config = parseWorktreeConfig(configBlob ? configBlob.toString('utf8') : null);
  const includePatterns = includeBlob ? includeBlob.toString('utf8') : ((await regularFileText(path.join(checkoutDir, '.worktreeinclude'))) ?? '');
  const folders: PreparedFolder[] = [
    ...deps.reuse.map((r) => ({ folder: r.folder, source: path.join(checkoutDir, r.folder), mode: 'reuse' as const, ...(r.alsoAtCheckoutPath ? { alsoAtSource: true } : {}) })),
    ...deps.install.flatMap((s) => s.folders).map((folder, i) => ({ folder, source: path.join(input.depsDir, String(i)), mode: 'install' as const })),
  ];
  return {
    status: 'pending',
    checkoutDir,
    folders,
    commands: setupCommands(deps, config.setup, input.settingCommands),
    includePatterns,
    copied: [],
    problems: config.problem ? [config.problem] : [],
  };
}

/** The setup has something to do (or to mount). */
export function setupHasWork(s: WorktreeSetupState): boolean {
  return s.folders.length > 0 || s.commands.length > 0 || s.includePatterns.trim() !== '';
}

/**
 * Sandbox mounts of the prepared folders over the worktree at `root` (the loop's worktree, or the
 * gate's clean checkout): read-only, except the installed folders during setup.
 */
export function setupMounts(s: WorktreeSetupState | undefined, root: string, phase: 'setup' | 'work'): { readOnlyBinds: Array<{ source: string; target: string }>; writableBinds: Array<{ source: string; target: string }> } {
  const readOnlyBinds: Array<{ source: string; target: string }> = [];
  const writableBinds: Array<{ source: string; target: string }> = [];
  for (const f of s?.folders ?? []) {
    const target = path.join(root, f.folder);
    if (f.mode === 'install' && phase === 'setup') writableBinds.push({ source: f.source, target });
    else readOnlyBinds.push({ source: f.source, target });
    if (f.alsoAtSource && f.source !== target) readOnlyBinds.push({ source: f.source, target: f.source });
  }
  return { readOnlyBinds, writableBinds };
}

/**
 * Makes the empty mount points under `root` (and the Forge-owned install folders). A link or a
 * file where a mount point goes is refused: the worktree is hostile input.
 */
export async function makeMountPoints(s: WorktreeSetupState, root: string): Promise<void> {
  for (const f of s.folders) {
    if (f.mode === 'install') await mkdir(f.source, { recursive: true });
    const target = path.join(root, f.folder);
    await mkdir(path.dirname(target), { recursive: true });
    // No link on the way: a mount point must be where it says, inside the worktree.
    if ((await realpath(path.dirname(target))) !== path.join(await realpath(root), path.dirname(f.folder))) {
      throw new Error(`${path.dirname(f.folder)} in ${root} is a link; Forge mounts ${f.folder} only inside the worktree`);
    }
    const st = await lstat(target).catch(() => null);
    if (st && !st.isDirectory()) throw new Error(`${f.folder} in ${root} is not a folder; Forge mounts the dependency folder there`);
    if (!st) await mkdir(target);
  }
}

/**
 * An unconfined loop's folders (installed in its worktree) seen from another folder (the gate's
 * clean checkout): links to them, made only where nothing is (the checkout is Forge's, never committed).
 */
export async function linkFolders(s: WorktreeSetupState, root: string): Promise<Array<{ path: string; target: string }>> {
  const links: Array<{ path: string; target: string }> = [];
  for (const f of s.folders) {
    const at = path.join(root, f.folder);
    const st = await lstat(at).catch(() => null);
    if (st?.isSymbolicLink() && (await readlink(at)) === f.source) {
      links.push({ path: f.folder, target: f.source });
      continue;
    }
    if (st) continue; // something is there already: left alone
    if (!(await lstat(f.source).catch(() => null))?.isDirectory()) continue;
    await mkdir(path.dirname(at), { recursive: true });
    await symlink(f.source, at);
    links.push({ path: f.folder, target: f.source });
  }
  return links;
}

/**
 * Forge's own prepared entries a `git status` line may name: copied files, unchanged, and a
 * dependency folder's mount point while it is empty on the host (git lists an ignored empty
 * folder; what the sandboxes see there is the mounted folder, never the agent's).
 */
export async function isPreparedEntry(s: WorktreeSetupState | undefined, root: string, entryPath: string): Promise<boolean> {
  if (!s) return false;
  const rel = entryPath.replace(/\/$/, '');
  if (s.folders.some((f) => f.folder === rel)) {
    const st = await lstat(path.join(root, rel)).catch(() => null);
    return st?.isDirectory() === true && (await readdir(path.join(root, rel))).length === 0;
  }
  const copied = s.copied.find((c) => c.path === rel);
  if (copied) {
    const st = await lstat(path.join(root, rel)).catch(() => null);
    if (!st?.isFile()) return false;
    return sha256(await readFile(path.join(root, rel))) === copied.sha256;
  }
  return false;
}
