import * as z from './zod';

/**
 * Every `forge.*` setting, declared once. The VS Code manifest (`package.json`
 * `contributes.configuration`) must list exactly these keys with these defaults;
 * a unit test keeps the two in step, so neither can drift silently.
 *
 * Each entry carries its own schema and default, so one bad value never costs
 * the user their other settings: it is reported and replaced by its default.
 */
const modelRef = z.string().check(z.regex(/^$|^[^/\s]+\/\S+$/, 'must be "provider/model" (for example "anthropic/claude-sonnet-4-5") or empty'));

const settingSpecs = {
  'forge.model': {
    schema: modelRef,
    default: '',
    description:
      'Model for coding sessions as "provider/model". Empty: the default model of your opencode configuration, or Forge\'s embedded scripted model when none is configured.',
  },
  'forge.auditorModel': {
    schema: modelRef,
    default: '',
    description: 'Model for audit sessions as "provider/model". Empty: the same as forge.model.',
  },
  'forge.auditorFallbackModels': {
    schema: z.array(modelRef.check(z.refine((v) => v.length > 0, 'must not be empty'))),
    default: [] as string[],
    description: 'Models tried in order when the auditor model keeps failing.',
  },
  'forge.loop.maxIterations': {
    schema: z.int().check(z.minimum(0), z.maximum(1000)),
    default: 15,
    description: 'Iteration cap of a loop (0 = unlimited). A loop that reaches it ends with reason max_iterations.',
  },
  'forge.loop.stallTimeoutMs': {
    schema: z.int().check(z.minimum(1000)),
    default: 60_000,
    description: 'Milliseconds without agent activity before the watchdog re-triggers the phase.',
  },
  'forge.loop.maxConsecutiveStalls': {
    schema: z.int().check(z.minimum(1), z.maximum(100)),
    default: 5,
    description: 'Consecutive stalls after which a loop ends with reason stall_timeout.',
  },
  'forge.loop.busyStallTimeoutMs': {
    schema: z.int().check(z.minimum(1000)),
    default: 900_000,
    description: 'Milliseconds a session may stay busy without progress before it is aborted and told to continue.',
  },
  'forge.loop.idleGateTimeoutMs': {
    schema: z.int().check(z.minimum(100)),
    default: 10_000,
    description: 'How long Forge waits for a prompted session to turn busy before it accepts an idle from it.',
  },
  'forge.loop.maxModelRetries': {
    schema: z.int().check(z.minimum(0), z.maximum(50)),
    default: 3,
    description: 'Model errors tolerated per phase (with back-off) before the loop ends with error_max_retries.',
  },
  'forge.loop.merge': {
    schema: z.enum(['never', 'fast-forward', 'merge']),
    default: 'never' as 'never' | 'fast-forward' | 'merge',
    description:
      'What a completed loop does with its branch: never (keep it for review), fast-forward the base branch when possible, or merge into it. Never forced; the branch is never deleted.',
  },
  'forge.loop.postAction': {
    schema: z.string().check(z.maxLength(20_000)),
    default: '',
    description:
      'Optional prompt run in a post_action phase after a clean final audit (for example "update the changelog"). Empty: no post action.',
  },
  'forge.loop.cleanupWorktree': {
    schema: z.boolean(),
    default: false,
    description: 'Remove a finished loop\'s worktree folder (the branch is always kept).',
  },
  'forge.loop.permissions': {
    schema: z.array(
      z.object({
        permission: z.string().check(z.minLength(1)),
        pattern: z.string().check(z.minLength(1)),
        action: z.literal('deny'),
      }),
    ),
    default: [] as Array<{ permission: string; pattern: string; action: 'deny' }>,
    description:
      'Extra deny rules for loop sessions ({ permission, pattern, action: "deny" }), layered before Forge\'s structural denies; they can never lift one.',
  },
  'forge.sandbox.enabled': {
    schema: z.boolean(),
    default: true,
    description:
      'Run new loops\' agent commands in a sandbox (on by default). Where no sandbox driver works, a loop runs unconfined and Forge says so plainly; see forge.sandbox.required. The status-bar item flips this.',
  },
  'forge.sandbox.required': {
    schema: z.boolean(),
    default: false,
    description: 'Refuse to start a loop that cannot be sandboxed, instead of running it unconfined with a warning.',
  },
  'forge.sandbox.driver': {
    schema: z.enum(['auto', 'docker', 'podman', 'bwrap', 'msb']),
    default: 'auto' as 'auto' | 'docker' | 'podman' | 'bwrap' | 'msb',
    description: 'Sandbox driver: auto picks the first that works of bwrap (Linux, no daemon), docker, podman.',
  },
  'forge.sandbox.image': {
    schema: z.string().check(z.minLength(1)),
    default: 'forge-sandbox:latest',
    description: 'Container image for the docker and podman drivers (built by "Forge: Build Sandbox Image"), when the repository has no Dev Container configuration (.devcontainer/devcontainer.json), whose image a loop then uses.',
  },
  'forge.sandbox.network': {
    schema: z.boolean(),
    default: false,
    description: 'Allow network access inside the sandbox.',
  },
  'forge.sandbox.cpus': {
    schema: z.number().check(z.positive(), z.maximum(256)),
    default: 2,
    description: 'CPU limit of a sandbox.',
  },
  'forge.sandbox.memoryMb': {
    schema: z.int().check(z.minimum(64)),
    default: 2048,
    description: 'Memory limit of a sandbox in MiB.',
  },
  'forge.sandbox.pidsLimit': {
    schema: z.int().check(z.minimum(16)),
    default: 512,
    description: 'Process limit of a sandbox.',
  },
  'forge.opencode.binaryPath': {
    schema: z.string(),
    default: '',
    description: "Path of the opencode binary. Empty: Forge's own opencode-ai dependency (a checkout), else `opencode` on PATH or in the global npm folders (`npm i -g opencode-ai`).",
  },
  'forge.opencode.serverUrl': {
    schema: z.union([z.literal(''), z.url({ protocol: /^https?$/ })]),
    default: '',
    description: 'Attach to this running opencode server instead of starting one (advanced).',
  },
  'forge.opencode.serverMode': {
    schema: z.enum(['shared', 'perLoop']),
    default: 'shared' as 'shared' | 'perLoop',
    description:
      'How loops get their opencode server. "shared": the loops of one Forge process share one server (each in its own worktree instance, with its own tools and its own sandbox), which starts a loop in well under a second and costs far less memory. "perLoop": every loop starts a server of its own.',
  },
  'forge.dataDir': {
    schema: z.string(),
    default: '',
    description: 'Folder for Forge\'s database and worktrees. Empty: $FORGE_DATA_DIR, else ~/.local/share/forge.',
  },
  'forge.openWorktree': {
    schema: z.enum(['add-folder', 'new-window', 'never']),
    default: 'add-folder' as 'add-folder' | 'new-window' | 'never',
    description: 'How a started loop\'s worktree is opened: added to the workspace, in a new window, or not at all.',
  },
  'forge.checks.timeoutMs': {
    schema: z.int().check(z.minimum(1000), z.maximum(24 * 60 * 60_000)),
    default: 600_000,
    description:
      "Milliseconds a verification check (a command of the plan's Verification part, a section's Verify: line, a goal's --check) may run before Forge kills it with everything it started; the check then fails.",
  },
  'forge.watchdog.mode': {
    schema: z.enum(['kill', 'dry-run', 'off']),
    default: 'kill' as 'kill' | 'dry-run' | 'off',
    description:
      "Shell-hang watchdog for the agents' builtin bash tool calls: kill (a call running past forge.watchdog.stallMs has its processes killed, so the call returns and the session goes on), dry-run (logs and records what it would kill, kills nothing), off.",
  },
  'forge.watchdog.stallMs': {
    schema: z.int().check(z.minimum(1)),
    default: 600_000,
    description:
      'Milliseconds a builtin bash tool call of a loop\'s agent may run before the shell-hang watchdog steps in. Values below 60000 are raised to 60000 (the floor). Long-running work belongs in forge_shell, which never hangs a session.',
  },
  'forge.budget.money': {
    schema: z.number().check(z.minimum(0)),
    default: 0,
    description:
      'Default money budget of a new loop (USD as opencode prices the models; 0 = none). At 80 % Forge warns; at 100 % the loop pauses at its next hand-over until you restart it with a higher budget.',
  },
  'forge.budget.tokens': {
    schema: z.int().check(z.minimum(0)),
    default: 0,
    description: 'Default token budget of a new loop (every token the models process; 0 = none). Paused and warned like the money budget.',
  },
  'forge.budget.auditorShare': {
    schema: z.number().check(z.minimum(0), z.maximum(1)),
    default: 0,
    description:
      'Share of each budget the auditor may spend, the coder the rest (for example 0.3). 0 = no split: coder and auditor share one budget.',
  },
  'forge.groups.maxConcurrentLoops': {
    schema: z.int().check(z.minimum(1), z.maximum(16)),
    default: 3,
    description: 'Feature groups (forge group PRD.md): how many of a group\'s feature loops run at once (1 to 16).',
  },
  'forge.groups.budget.money': {
    schema: z.number().check(z.minimum(0)),
    default: 0,
    description:
      'Default money budget of a new feature group, over all its loops together (USD as opencode prices the models; 0 = none). At 80 % Forge warns; at 100 % the group pauses: nothing new starts and its running loops pause at their next hand-over.',
  },
  'forge.groups.budget.tokens': {
    schema: z.int().check(z.minimum(0)),
    default: 0,
    description: 'Default token budget of a new feature group, over all its loops together (0 = none). Paused and warned like the money budget.',
  },
  'forge.engine.shareProcess': {
    schema: z.boolean(),
    default: true,
    description:
      'One engine per data folder: a forge run (or a window) whose data folder already has a running Forge engine (another forge run, a VS Code window) hands its loop to that process, so loops share one process, one server and one writer. Off: every process supervises its own loops (CI isolation; forge run --no-handover does the same for one run).',
  },
  'forge.accept.strategy': {
    schema: z.enum(['merge-commit', 'squash']),
    default: 'merge-commit' as 'merge-commit' | 'squash',
    description:
      'How Accept Loop (forge accept) brings a loop branch into its base branch when the base cannot be fast-forwarded: merge-commit (a merge commit) or squash (one commit). A fast-forward is used whenever possible.',
  },
  'forge.worktree.dependencies': {
    schema: z.enum(['reuse', 'install']),
    default: 'reuse' as 'reuse' | 'install',
    description:
      "How a loop's worktree gets the project's dependencies (node_modules, .venv, vendor) before its first session: reuse the folder installed in your checkout, read-only, when the lockfile is the same (else install), or always install it in the worktree.",
  },
  'forge.worktree.setup': {
    schema: z.array(z.string().check(z.refine((v) => v.trim().length > 0, 'must not be empty'))),
    default: [] as string[],
    description:
      "Commands run in a loop's worktree before its first session (after the dependencies and the files of .worktreeinclude), after those of .forge/worktree.json; in the loop's sandbox with the network on.",
  },
  'forge.worktree.setupTimeoutMs': {
    schema: z.int().check(z.minimum(1000), z.maximum(24 * 60 * 60_000)),
    default: 900_000,
    description: "Milliseconds a loop's worktree setup (installs and setup commands together) may take before Forge ends it; the loop then ends as setup_failed.",
  },
} as const;

type Specs = typeof settingSpecs;
export type SettingKey = keyof Specs;
export type ForgeSettings = { [K in SettingKey]: z.output<Specs[K]['schema']> };

export interface SettingDescriptor {
  key: SettingKey;
  default: unknown;
  description: string;
}

export const settingDescriptors: readonly SettingDescriptor[] = (Object.keys(settingSpecs) as SettingKey[]).map(
  (key) => ({ key, default: settingSpecs[key].default, description: settingSpecs[key].description }),
);

export interface SettingProblem {
  /** The key as the user wrote it: a known setting with a bad value, or an unknown key. */
  key: string;
  value: unknown;
  message: string;
  /** For an unknown key: the known setting it most likely meant, if any is close. */
  suggestion?: SettingKey;
}

const SETTING_KEYS = Object.keys(settingSpecs) as SettingKey[];
const KNOWN_KEYS: ReadonlySet<string> = new Set(SETTING_KEYS);

export function isSettingKey(key: string): key is SettingKey {
  return KNOWN_KEYS.has(key);
}

/**
 * Edit distance with adjacent transpositions (optimal string alignment): insertions,
 * deletions, substitutions and swaps of two neighbours cost 1 each, so `maxIteration`,
 * `maxIteratoins` and `maxIterationss` are all one edit from `maxIterations`.
 */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The known setting `key` most likely meant: the nearest by edit distance (case-insensitive),
 * when it is within a third of the key's length past "forge." (at least 2 edits); null when no
 * setting is that close. Ties go to the first key in declaration order.
 */
export function nearestSettingKey(key: string): SettingKey | null {
  const wanted = key.toLowerCase();
  const budget = Math.max(2, Math.floor(wanted.replace(/^forge\./, '').length / 3));
  let best: SettingKey | null = null;
  let bestDistance = Infinity;
  for (const known of SETTING_KEYS) {
    const distance = editDistance(wanted, known.toLowerCase());
    if (distance < bestDistance) {
      best = known;
      bestDistance = distance;
    }
  }
  return bestDistance <= budget ? best : null;
}

/**
 * One warning per key that is not a Forge setting: a `forge.*` key Forge does not know (a typo,
 * a setting of another version), or a key outside `forge.` (FORGE_SETTINGS only holds forge.*
 * keys). Each names the nearest known key when one is close. Such keys are ignored.
 */
export function unknownSettingProblems(keys: Iterable<string>, read: (key: string) => unknown = () => undefined): SettingProblem[] {
  const problems: SettingProblem[] = [];
  for (const key of keys) {
    if (isSettingKey(key)) continue;
    const inForge = key.startsWith('forge.');
    // "loop.maxIterations" most likely meant "forge.loop.maxIterations".
    const suggestion = nearestSettingKey(key) ?? (inForge ? null : nearestSettingKey(`forge.${key}`));
    const hint = suggestion ? ` Did you mean "${suggestion}"?` : inForge ? ' No Forge setting is close to it; the settings are the forge.* keys of Forge\'s settings page (package.json contributes.configuration).' : '';
    const what = inForge ? `"${key}" is not a Forge setting and is ignored.` : `"${key}" is ignored: Forge settings are keys starting with "forge.".`;
    problems.push({ key, value: read(key), message: `Setting ${what}${hint}`, ...(suggestion ? { suggestion } : {}) });
  }
  return problems;
}

/**
 * The dotted keys under `prefix` of a nested settings object (VS Code's configuration section
 * `forge` holds `{ loop: { maxIterations: 15, … }, … }`): descends into plain objects, stops at a
 * known setting, arrays and other values, and skips functions (the section's own get/has/inspect).
 */
export function flattenSettingKeys(prefix: string, section: unknown): string[] {
  const keys: string[] = [];
  const walk = (path: string, value: unknown) => {
    if (typeof value === 'function') return;
    if (isSettingKey(path) || value === null || typeof value !== 'object' || Array.isArray(value)) {
      keys.push(path);
      return;
    }
    for (const [k, v] of Object.entries(value)) walk(`${path}.${k}`, v);
  };
  if (section !== null && typeof section === 'object') for (const [k, v] of Object.entries(section)) walk(`${prefix}.${k}`, v);
  return keys;
}

export function defaultSettings(): ForgeSettings {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(settingSpecs) as SettingKey[]) out[key] = structuredClone(settingSpecs[key].default);
  return out as ForgeSettings;
}

/**
 * Validates raw values (undefined = not set) key by key. A bad value is replaced
 * by its default and reported with the key, the value and what is allowed. When the keys the
 * user set are given (`setKeys`), each one that is not a Forge setting is reported too.
 */
export function resolveSettings(
  read: (key: SettingKey) => unknown,
  setKeys?: Iterable<string>,
): { settings: ForgeSettings; problems: SettingProblem[] } {
  const settings = defaultSettings() as Record<string, unknown>;
  const problems: SettingProblem[] = setKeys ? unknownSettingProblems(setKeys, read as (key: string) => unknown) : [];
  for (const key of SETTING_KEYS) {
    const raw = read(key);
    if (raw === undefined || raw === null) continue;
    const parsed = (settingSpecs[key].schema as z.ZodMiniType).safeParse(raw);
    if (parsed.success) {
      settings[key] = parsed.data;
    } else {
      const allowed = parsed.error.issues.map((i) => i.message).join('; ');
      problems.push({
        key,
        value: raw,
        message: `Setting "${key}" has the invalid value ${JSON.stringify(raw)}: ${allowed}. Using the default ${JSON.stringify(settingSpecs[key].default)}.`,
      });
    }
  }
  return { settings: settings as ForgeSettings, problems };
}

/** The JSON-schema fragment VS Code needs for one setting; used to generate and check the manifest. */
export function manifestSchemaFor(key: SettingKey): Record<string, unknown> {
  const spec = settingSpecs[key];
  const json = z.toJSONSchema(spec.schema as z.ZodMiniType, { unrepresentable: 'any' }) as Record<string, unknown>;
  delete json.$schema;
  // zod spells "no upper bound" on integers as MAX_SAFE_INTEGER; VS Code needs no bound at all.
  if (json.maximum === Number.MAX_SAFE_INTEGER) delete json.maximum;
  return { ...json, default: spec.default, description: spec.description };
}
