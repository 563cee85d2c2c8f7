/**
 * Command-line grammar of `forge`. Pure: argv in, a typed command or a usage error out.
 */
import { parseArgs } from 'node:util';
import type { TerminationReason } from '../core/loop/state';

export const USAGE = `Usage:
  forge run PLAN.md      [options]   run a plan as an audited loop
  forge goal "TEXT"      [options]   run a goal loop (no sections, no final audit)
  forge status [NAME]    [--json]    list loops, or show one
  forge findings NAME    [--json]    list a loop's review findings
  forge cancel NAME                  cancel a running loop
  forge restart NAME     [--force]   restart a loop that is not completed

Options:
  --repo DIR               git repository (default: current directory)
  --name NAME              loop name (default: from the plan)
  --max-iterations N       iteration cap (0 = unlimited; default 15)
  --model PROVIDER/MODEL   coding model (default: your opencode configuration,
                           else Forge's embedded scripted model)
  --auditor-model P/M      audit model (default: --model)
  --variant NAME           variant of the coding model (reasoning effort, e.g.
                           high, max, minimal: see opencode models --verbose)
  --sandbox                run agent shell commands in a sandbox
  --merge MODE             never | fast-forward | merge (default: never)
  --data-dir DIR           Forge data folder (or FORGE_DATA_DIR)
  --json                   one JSON object per line
  -h, --help               this text

Exit codes: 0 completed; 2 bad input; 3 cancelled; 4 max_iterations; 5 stalled;
6 model or agent failure; 7 worktree failure; 8 opencode failure;
9 another process took over the loop; 1 internal error.`;

export interface CommonOptions {
  repo: string;
  dataDir: string | null;
  json: boolean;
}

export interface RunOptions extends CommonOptions {
  name: string | null;
  maxIterations: number | null;
  model: string | null;
  auditorModel: string | null;
  variant: string | null;
  sandbox: boolean;
  merge: 'never' | 'fast-forward' | 'merge' | null;
}

export type CliCommand =
  | { command: 'help' }
  | ({ command: 'run'; planPath: string } & RunOptions)
  | ({ command: 'goal'; goal: string } & RunOptions)
  | ({ command: 'status'; name: string | null } & CommonOptions)
  | ({ command: 'findings'; name: string } & CommonOptions)
  | ({ command: 'cancel'; name: string } & CommonOptions)
  | ({ command: 'restart'; name: string; force: boolean } & CommonOptions);

export class UsageError extends Error {
  override name = 'UsageError';
}

const MODEL_RE = /^[^/\s]+\/\S+$/;
const VARIANT_RE = /^[\w.-]+$/;

export function parseCli(argv: readonly string[], cwd: string): CliCommand {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        repo: { type: 'string' },
        name: { type: 'string' },
        'max-iterations': { type: 'string' },
        model: { type: 'string' },
        'auditor-model': { type: 'string' },
        variant: { type: 'string' },
        sandbox: { type: 'boolean' },
        merge: { type: 'string' },
        'data-dir': { type: 'string' },
        json: { type: 'boolean' },
        force: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const { values: v, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (v.help || command === undefined || command === 'help') return { command: 'help' };

  const common: CommonOptions = { repo: v.repo ?? cwd, dataDir: v['data-dir'] ?? null, json: v.json ?? false };
  const one = (what: string): string => {
    if (rest.length !== 1 || !rest[0]) throw new UsageError(`forge ${command} takes exactly one ${what}.`);
    return rest[0];
  };
  const runOnly = ['name', 'max-iterations', 'model', 'auditor-model', 'variant', 'sandbox', 'merge'] as const;
  if (command !== 'run' && command !== 'goal') {
    for (const k of runOnly) if (v[k] !== undefined) throw new UsageError(`--${k} applies to forge run and forge goal only.`);
  }
  if (command !== 'restart' && v.force) throw new UsageError('--force applies to forge restart only.');

  switch (command) {
    case 'run':
      return { command, planPath: one('plan file'), ...common, ...runOptions(v) };
    case 'goal': {
      const goal = rest.join(' ').trim();
      if (!goal) throw new UsageError('forge goal needs the goal text, e.g. forge goal "make npm test pass".');
      return { command, goal, ...common, ...runOptions(v) };
    }
    case 'status':
      if (rest.length > 1) throw new UsageError('forge status takes at most one loop name.');
      return { command, name: rest[0] ?? null, ...common };
    case 'findings':
      return { command, name: one('loop name'), ...common };
    case 'cancel':
      return { command, name: one('loop name'), ...common };
    case 'restart':
      return { command, name: one('loop name'), force: v.force ?? false, ...common };
    default:
      throw new UsageError(`Unknown command "${command}".`);
  }
}

function runOptions(v: Record<string, string | boolean | undefined>): Omit<RunOptions, keyof CommonOptions> {
  let maxIterations: number | null = null;
  const mi = v['max-iterations'];
  if (typeof mi === 'string') {
    if (!/^\d+$/.test(mi)) throw new UsageError(`--max-iterations must be a whole number ≥ 0 (0 = unlimited), not "${mi}".`);
    maxIterations = Number(mi);
  }
  for (const k of ['model', 'auditor-model'] as const) {
    const m = v[k];
    if (typeof m === 'string' && !MODEL_RE.test(m)) {
      throw new UsageError(`--${k} must be "provider/model" (for example anthropic/claude-sonnet-4-5), not "${m}".`);
    }
  }
  const variant = v.variant;
  if (typeof variant === 'string' && !VARIANT_RE.test(variant)) {
    throw new UsageError(`--variant must be a variant name such as high, max or minimal (letters, digits, "-", "_", "."), not "${variant}".`);
  }
  const merge = v.merge;
  if (typeof merge === 'string' && !['never', 'fast-forward', 'merge'].includes(merge)) {
    throw new UsageError(`--merge must be never, fast-forward or merge, not "${merge}".`);
  }
  return {
    name: typeof v.name === 'string' ? v.name : null,
    maxIterations,
    model: typeof v.model === 'string' ? v.model : null,
    auditorModel: typeof v['auditor-model'] === 'string' ? v['auditor-model'] : null,
    variant: typeof variant === 'string' ? variant : null,
    sandbox: v.sandbox === true,
    merge: (merge as RunOptions['merge']) ?? null,
  };
}

export const EXIT = {
  completed: 0,
  internal: 1,
  badInput: 2,
  cancelled: 3,
  maxIterations: 4,
  stalled: 5,
  agentFailure: 6,
  worktreeFailure: 7,
  opencodeFailure: 8,
  supervisionLost: 9,
} as const;

export function exitCodeFor(reason: TerminationReason): number {
  switch (reason.kind) {
    case 'completed':
      return EXIT.completed;
    case 'cancelled':
    case 'user_aborted':
    case 'shutdown':
      return EXIT.cancelled;
    case 'max_iterations':
      return EXIT.maxIterations;
    case 'stall_timeout':
      return EXIT.stalled;
    case 'error_max_retries':
    case 'model_stream_malformed':
    case 'audit_retry_exhausted':
    case 'final_audit_retry_exhausted':
    case 'coding_no_assistant':
      return EXIT.agentFailure;
    case 'missing_worktree_dir':
    case 'worktree_failed':
      return EXIT.worktreeFailure;
    case 'session_creation_failed':
      return EXIT.opencodeFailure;
  }
}
