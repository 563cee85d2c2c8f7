import { z } from 'zod';

/**
 * Every `forge.*` setting, declared once. The VS Code manifest (`package.json`
 * `contributes.configuration`) must list exactly these keys with these defaults;
 * a unit test keeps the two in step, so neither can drift silently.
 *
 * Each entry carries its own schema and default, so one bad value never costs
 * the user their other settings: it is reported and replaced by its default.
 */
const modelRef = z
  .string()
  .regex(/^$|^[^/\s]+\/\S+$/, 'must be "provider/model" (for example "anthropic/claude-sonnet-4-5") or empty');

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
    schema: z.array(modelRef.refine((v) => v.length > 0, 'must not be empty')),
    default: [] as string[],
    description: 'Models tried in order when the auditor model keeps failing.',
  },
  'forge.loop.maxIterations': {
    schema: z.number().int().min(0).max(1000),
    default: 15,
    description: 'Iteration cap of a loop (0 = unlimited). A loop that reaches it ends with reason max_iterations.',
  },
  'forge.loop.stallTimeoutMs': {
    schema: z.number().int().min(1000),
    default: 60_000,
    description: 'Milliseconds without agent activity before the watchdog re-triggers the phase.',
  },
  'forge.loop.maxConsecutiveStalls': {
    schema: z.number().int().min(1).max(100),
    default: 5,
    description: 'Consecutive stalls after which a loop ends with reason stall_timeout.',
  },
  'forge.loop.busyStallTimeoutMs': {
    schema: z.number().int().min(1000),
    default: 900_000,
    description: 'Milliseconds a session may stay busy without progress before it is aborted and told to continue.',
  },
  'forge.loop.idleGateTimeoutMs': {
    schema: z.number().int().min(100),
    default: 10_000,
    description: 'How long Forge waits for a prompted session to turn busy before it accepts an idle from it.',
  },
  'forge.loop.maxModelRetries': {
    schema: z.number().int().min(0).max(50),
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
    schema: z.string().max(20_000),
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
        permission: z.string().min(1),
        pattern: z.string().min(1),
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
    schema: z.string().min(1),
    default: 'forge-sandbox:latest',
    description: 'Container image for the docker and podman drivers (built by "Forge: Build Sandbox Image").',
  },
  'forge.sandbox.network': {
    schema: z.boolean(),
    default: false,
    description: 'Allow network access inside the sandbox.',
  },
  'forge.sandbox.cpus': {
    schema: z.number().positive().max(256),
    default: 2,
    description: 'CPU limit of a sandbox.',
  },
  'forge.sandbox.memoryMb': {
    schema: z.number().int().min(64),
    default: 2048,
    description: 'Memory limit of a sandbox in MiB.',
  },
  'forge.sandbox.pidsLimit': {
    schema: z.number().int().min(16),
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
  key: SettingKey;
  value: unknown;
  message: string;
}

export function defaultSettings(): ForgeSettings {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(settingSpecs) as SettingKey[]) out[key] = structuredClone(settingSpecs[key].default);
  return out as ForgeSettings;
}

/**
 * Validates raw values (undefined = not set) key by key. A bad value is replaced
 * by its default and reported with the key, the value and what is allowed.
 */
export function resolveSettings(read: (key: SettingKey) => unknown): { settings: ForgeSettings; problems: SettingProblem[] } {
  const settings = defaultSettings() as Record<string, unknown>;
  const problems: SettingProblem[] = [];
  for (const key of Object.keys(settingSpecs) as SettingKey[]) {
    const raw = read(key);
    if (raw === undefined || raw === null) continue;
    const parsed = (settingSpecs[key].schema as z.ZodType).safeParse(raw);
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
  const json = z.toJSONSchema(spec.schema as z.ZodType, { unrepresentable: 'any' }) as Record<string, unknown>;
  delete json.$schema;
  // zod spells "no upper bound" on integers as MAX_SAFE_INTEGER; VS Code needs no bound at all.
  if (json.maximum === Number.MAX_SAFE_INTEGER) delete json.maximum;
  return { ...json, default: spec.default, description: spec.description };
}
