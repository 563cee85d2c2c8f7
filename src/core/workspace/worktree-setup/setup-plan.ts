/**
 * What a loop's worktree needs before its first session (issue 27), decided from the files the
 * base commit tracks. Pure: the facts about the user's checkout (is a lockfile the same, is a
 * dependency folder installed) come in as functions.
 *
 * Each lockfile is a project (a monorepo's root lockfile covers its workspace members, which have
 * no lockfile of their own). Per dependency folder (node_modules, .venv/venv, vendor) the plan
 * either
 * - **reuses** the user's installed folder: bound read-only at the same path inside the sandbox,
 *   never placed in the worktree; only when the project's lockfiles are byte for byte the
 *   checkout's and the checkout has the folder installed; or
 * - **installs** it: the project's own install command runs in the worktree during setup.
 */

export type PackageManager = 'npm' | 'pnpm' | 'yarn' | 'bun' | 'uv' | 'poetry' | 'pip' | 'composer';
export type DependencyMode = 'reuse' | 'install';

export interface DetectedProject {
  /** Folder of the project, relative to the repository root ('' for the root). */
  dir: string;
  manager: PackageManager;
  /** The lockfiles whose bytes decide reuse (relative to the repository root). */
  lockfiles: string[];
  /** Dependency folders the lockfile installs (relative to the repository root), the project's own first. */
  folders: string[];
  /** A file inside a folder that says it is installed (relative to the folder). */
  installedMarker: string;
  /** The install command, run in `dir`. */
  install: string;
}

/** Lockfiles by ecosystem, most specific first: one manager per folder and ecosystem. */
const JS_LOCKFILES: ReadonlyArray<[string, PackageManager]> = [
  ['pnpm-lock.yaml', 'pnpm'],
  ['yarn.lock', 'yarn'],
  ['bun.lock', 'bun'],
  ['bun.lockb', 'bun'],
  ['package-lock.json', 'npm'],
  ['npm-shrinkwrap.json', 'npm'],
];
const PY_LOCKFILES: ReadonlyArray<[string, PackageManager]> = [
  ['uv.lock', 'uv'],
  ['poetry.lock', 'poetry'],
];
const REQUIREMENTS = /^requirements([-_.][A-Za-z0-9_.-]*)?\.txt$/;

/** Folders never searched for projects: installed dependencies and VCS data. */
const SKIPPED_DIRS = new Set(['node_modules', '.venv', 'venv', 'vendor', '.git', '.forge']);

const dirOf = (p: string): string => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '');
const baseOf = (p: string): string => p.slice(p.lastIndexOf('/') + 1);
const join = (dir: string, name: string): string => (dir === '' ? name : `${dir}/${name}`);

function skipped(p: string): boolean {
  return p.split('/').slice(0, -1).some((part) => SKIPPED_DIRS.has(part));
}

function jsInstall(manager: PackageManager, tracked: ReadonlySet<string>, dir: string): string {
  switch (manager) {
    case 'pnpm':
      return 'pnpm install --frozen-lockfile';
    case 'yarn':
      // Yarn 2+ (a .yarnrc.yml) knows --immutable; classic yarn --frozen-lockfile.
      return tracked.has(join(dir, '.yarnrc.yml')) ? 'yarn install --immutable' : 'yarn install --frozen-lockfile';
    case 'bun':
      return 'bun install --frozen-lockfile';
    default:
      return 'npm ci';
  }
}

/**
 * The projects of a repository from the paths its base commit tracks. A folder's JavaScript
 * project collects the `node_modules` of the workspace members below it (tracked package.json
 * files without a lockfile of their own nearer to them).
 */
export function detectProjects(trackedPaths: readonly string[]): DetectedProject[] {
  const tracked = new Set(trackedPaths.filter((p) => !skipped(p)));
  const byDir = new Map<string, Set<string>>();
  for (const p of tracked) {
    const d = dirOf(p);
    let names = byDir.get(d);
    if (!names) byDir.set(d, (names = new Set()));
    names.add(baseOf(p));
  }
  const projects: DetectedProject[] = [];
  const jsRoots: DetectedProject[] = [];
  for (const dir of [...byDir.keys()].sort()) {
    const names = byDir.get(dir)!;
    const js = JS_LOCKFILES.find(([f]) => names.has(f));
    if (js) {
      const project: DetectedProject = {
        dir,
        manager: js[1],
        lockfiles: [join(dir, js[0])],
        folders: [join(dir, 'node_modules')],
        installedMarker: '',
        install: jsInstall(js[1], tracked, dir),
      };
      projects.push(project);
      jsRoots.push(project);
    }
    const py = PY_LOCKFILES.find(([f]) => names.has(f));
    const requirements = [...names].filter((n) => REQUIREMENTS.test(n)).sort(requirementsFirst);
    if (py) {
      projects.push({
        dir,
        manager: py[1],
        lockfiles: [join(dir, py[0])],
        folders: [join(dir, '.venv')],
        installedMarker: 'pyvenv.cfg',
        install: py[1] === 'uv' ? 'uv sync --frozen' : 'poetry install --no-root --no-interaction',
      });
    } else if (requirements.length > 0) {
      const reqArgs = requirements.map((r) => `-r ${r}`).join(' ');
      projects.push({
        dir,
        manager: 'pip',
        lockfiles: requirements.map((r) => join(dir, r)),
        folders: [join(dir, '.venv'), join(dir, 'venv')],
        installedMarker: 'pyvenv.cfg',
        install: `python3 -m venv .venv && .venv/bin/python -m pip install ${reqArgs}`,
      });
    }
    if (names.has('composer.lock')) {
      projects.push({
        dir,
        manager: 'composer',
        lockfiles: [join(dir, 'composer.lock')],
        folders: [join(dir, 'vendor')],
        installedMarker: 'autoload.php',
        install: 'composer install --no-interaction',
      });
    }
  }
  // Workspace members: a tracked package.json below a JS project with no lockfile of its own
  // (the nearest JS project above it owns its node_modules).
  for (const p of [...tracked].sort()) {
    if (baseOf(p) !== 'package.json') continue;
    const dir = dirOf(p);
    if (jsRoots.some((r) => r.dir === dir)) continue;
    const owner = jsRoots
      .filter((r) => r.dir === '' || dir.startsWith(`${r.dir}/`))
      .sort((a, b) => b.dir.length - a.dir.length)[0];
    if (owner) owner.folders.push(join(dir, 'node_modules'));
  }
  return projects;
}

/** requirements.txt first, then the others by name. */
function requirementsFirst(a: string, b: string): number {
  if (a === 'requirements.txt') return -1;
  if (b === 'requirements.txt') return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** What the checkout of the user shows, asked by the planner. */
export interface CheckoutFacts {
  /** The lockfile's bytes in the user's checkout equal the base commit's (false when absent there). */
  sameLockfile(lockfile: string): boolean;
  /** The dependency folder is installed in the user's checkout (a folder, with `marker` in it when one is given). */
  installed(folder: string, marker: string): boolean;
}

export interface ReuseStep {
  project: string;
  manager: PackageManager;
  /** The folder, relative to the repository root: the checkout's is bound read-only at the worktree's. */
  folder: string;
  /** Python environments name their own absolute path (scripts' #! lines): also bound at the checkout's path. */
  alsoAtCheckoutPath: boolean;
}

export interface InstallStep {
  project: string;
  manager: PackageManager;
  /** Where the command runs, relative to the repository root. */
  dir: string;
  command: string;
  /** The folders it fills in the worktree (bound read-only for the sessions afterwards). */
  folders: string[];
  /** Why it installs rather than reuses, for the setup's step line. */
  why: string;
}

export interface DependencyPlan {
  reuse: ReuseStep[];
  install: InstallStep[];
}

/** Per project: reuse its installed folders when allowed and the lockfile is the same, else install. */
export function planDependencies(projects: readonly DetectedProject[], facts: CheckoutFacts, mode: DependencyMode): DependencyPlan {
  const plan: DependencyPlan = { reuse: [], install: [] };
  for (const project of projects) {
    const label = project.lockfiles[0]!;
    const installedFolders = project.folders.filter((f) => facts.installed(f, project.installedMarker));
    const python = project.installedMarker === 'pyvenv.cfg';
    // A Python project has one environment: the first installed of its candidate folders.
    const reusable = python ? installedFolders.slice(0, 1) : installedFolders;
    const own = project.folders[0]!;
    const ownInstalled = python ? reusable.length > 0 : installedFolders.includes(own);
    let why: string | null = null;
    if (mode === 'install') why = 'forge.worktree.dependencies is "install"';
    else if (!project.lockfiles.every((l) => facts.sameLockfile(l))) why = `${label} differs from your checkout's`;
    else if (!ownInstalled) why = `nothing is installed in your checkout's ${own}`;
    if (why === null) {
      for (const folder of reusable) plan.reuse.push({ project: label, manager: project.manager, folder, alsoAtCheckoutPath: python });
    } else {
      plan.install.push({
        project: label,
        manager: project.manager,
        dir: project.dir,
        command: project.install,
        folders: python ? [project.folders[0]!] : project.folders,
        why,
      });
    }
  }
  return plan;
}

/** `.forge/worktree.json` as committed: `{ "setup": ["cmd", …] }`. Problems are reported, never thrown. */
export function parseWorktreeConfig(text: string | null): { setup: string[]; problem: string | null } {
  if (text === null) return { setup: [], problem: null };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { setup: [], problem: `.forge/worktree.json is not JSON: ${(error as Error).message}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { setup: [], problem: '.forge/worktree.json must be an object like { "setup": ["npm run build"] }' };
  const setup = (value as { setup?: unknown }).setup;
  if (setup === undefined) return { setup: [], problem: null };
  if (!Array.isArray(setup) || !setup.every((c) => typeof c === 'string' && c.trim() !== '')) {
    return { setup: [], problem: '.forge/worktree.json: "setup" must be a list of non-empty command strings' };
  }
  return { setup: setup as string[], problem: null };
}

/** One command of the setup phase, in the order it runs. */
export interface SetupCommand {
  /** For the step line: `install node_modules (npm ci)`, `setup: make dev`. */
  label: string;
  command: string;
  /** Where it runs, relative to the repository root. */
  dir: string;
}

/** Installs first (each in its project's folder), then the committed setup commands, then the setting's. */
export function setupCommands(deps: DependencyPlan, committed: readonly string[], fromSetting: readonly string[]): SetupCommand[] {
  return [
    ...deps.install.map((s) => ({ label: `install ${s.folders[0]} (${s.command}; ${s.why})`, command: s.command, dir: s.dir })),
    ...[...committed, ...fromSetting].map((c) => ({ label: `setup: ${c}`, command: c, dir: '' })),
  ];
}

/** Package-manager cache variables, all pointing into Forge's package cache (writable during setup only). */
export function packageCacheEnv(cacheDir: string): Record<string, string> {
  return {
    npm_config_cache: `${cacheDir}/npm`,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    YARN_CACHE_FOLDER: `${cacheDir}/yarn`,
    PNPM_HOME: `${cacheDir}/pnpm-home`,
    BUN_INSTALL_CACHE_DIR: `${cacheDir}/bun`,
    PIP_CACHE_DIR: `${cacheDir}/pip`,
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
    UV_CACHE_DIR: `${cacheDir}/uv`,
    POETRY_CACHE_DIR: `${cacheDir}/poetry`,
    POETRY_VIRTUALENVS_IN_PROJECT: 'true',
    COMPOSER_HOME: `${cacheDir}/composer`,
  };
}

/** The tail of a command's output for the setup_failed reason: at most `lines` lines, `chars` characters. */
export function outputTail(text: string, lines = 15, chars = 2000): string {
  const kept = text.replace(/\s+$/, '').split('\n').slice(-lines).join('\n');
  return kept.length > chars ? `…${kept.slice(-chars)}` : kept;
}

/** Why a setup command failed, for the user: exit 127 means the sandbox (or host) lacks the command. */
export function describeSetupFailure(step: SetupCommand, result: { exitCode: number | null; timedOut: boolean; output: string }, where: string): string {
  const head = result.timedOut
    ? `${step.label} did not finish within forge.worktree.setupTimeoutMs`
    : result.exitCode === 127
      ? `${step.label} failed: command not found (exit 127): ${where} lacks a program it runs`
      : `${step.label} failed (exit ${result.exitCode ?? 'by a signal'})`;
  const tail = outputTail(result.output);
  return tail ? `${head}:\n${tail}` : head;
}
