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
  --sandbox                require a sandbox (refuse to start without one)
  --no-sandbox             run unconfined (by default a loop is sandboxed
                           where a driver works, else unconfined with a warning)
  --merge MODE             never | fast-forward | merge (default: never)
  --check CMD              goal: a command that must exit 0 before the goal
                           completes (repeatable; Forge runs it, not the model)
  --exists PATH            goal: a file that must exist (repeatable)
  --contains PATH:TEXT     goal: a file that must contain TEXT (repeatable)
  --matches PATH:/RE/      goal: a file whose content must match (repeatable)
  --follow                 run, goal, restart: also print what the agent does
                           (one line per tool call, one per message it writes)
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
  /** true: required (--sandbox); false: off (--no-sandbox); null: the settings decide. */
  sandbox: boolean | null;
  merge: 'never' | 'fast-forward' | 'merge' | null;
  /** Print the agent's tool calls and messages as they happen (--follow). */
  follow: boolean;
}

/** A goal's contract: checks Forge runs itself before the goal can complete (issue 13). */
export interface GoalCheckArgs {
  check: string[];
  exists: string[];
  contains: string[];
  matches: string[];
}

export type CliCommand =
  | { command: 'help' }
  | ({ command: 'run'; planPath: string } & RunOptions)
  | ({ command: 'goal'; goal: string; checks: GoalCheckArgs } & RunOptions)
  | ({ command: 'status'; name: string | null } & CommonOptions)
  | ({ command: 'findings'; name: string } & CommonOptions)
  | ({ command: 'cancel'; name: string } & CommonOptions)
  | ({ command: 'restart'; name: string; force: boolean; follow: boolean } & CommonOptions);

export class UsageError extends Error {
  override name = 'UsageError';
}

const MODEL_RE = /^[^/\s]+\/\S+$/;
const VARIANT_RE = /^[\w.-]+$/;

/** Options that take a value, with what the value is (as USAGE names it). */
const VALUE_OPTIONS: Readonly<Record<string, string>> = {
  repo: 'the folder of a git repository',
  name: 'a loop name',
  'max-iterations': 'a whole number ≥ 0 (0 = unlimited)',
  model: 'a PROVIDER/MODEL',
  'auditor-model': 'a PROVIDER/MODEL',
  variant: 'a variant name such as high',
  merge: 'never, fast-forward or merge',
  'data-dir': 'a folder',
  check: 'a shell command',
  exists: 'a path in the repository',
  contains: 'PATH:TEXT',
  matches: 'PATH:/REGEX/FLAGS',
};

/**
 * Says in Forge's words what node:util's parseArgs would report as "ambiguous" or "missing":
 * an option that takes a value followed by nothing, or by something that looks like an option
 * (`--name -rf`, `--max-iterations -1`). `--name=-rf` stays possible for a value that starts
 * with "-". Stops at "--", after which everything is a positional argument.
 */
function checkOptionValues(argv: readonly string[]): void {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return;
    const option = /^--([a-z-]+)$/.exec(arg)?.[1];
    if (option === undefined || !(option in VALUE_OPTIONS)) continue;
    const value = argv[i + 1];
    if (value === undefined) throw new UsageError(`--${option} needs a value: ${VALUE_OPTIONS[option]}.`);
    if (value.startsWith('-')) {
      if (option === 'max-iterations') throw new UsageError(`--max-iterations must be a whole number ≥ 0 (0 = unlimited), not "${value}".`);
      throw new UsageError(`--${option} needs a value (${VALUE_OPTIONS[option]}), but "${value}" looks like an option. Write --${option}=${value} if you mean it as the value.`);
    }
    i++;
  }
}

/** node:util's parseArgs errors in Forge's words (what is wrong, and where the options are listed). */
function parseArgsMessage(error: Error & { code?: string }): string {
  const option = /'(-[^' ]+)/.exec(error.message)?.[1];
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) return `Unknown option ${option}. "forge --help" lists the options.`;
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option && /does not take an argument/.test(error.message)) {
    return `${option} takes no value (it is a switch): write ${option} alone.`;
  }
  return error.message;
}

export function parseCli(argv: readonly string[], cwd: string): CliCommand {
  checkOptionValues(argv);
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
        'no-sandbox': { type: 'boolean' },
        merge: { type: 'string' },
        'data-dir': { type: 'string' },
        check: { type: 'string', multiple: true },
        exists: { type: 'string', multiple: true },
        contains: { type: 'string', multiple: true },
        matches: { type: 'string', multiple: true },
        json: { type: 'boolean' },
        force: { type: 'boolean' },
        follow: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new UsageError(parseArgsMessage(e as Error & { code?: string }));
  }
  const { values: v, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (v.help || command === undefined || command === 'help') return { command: 'help' };

  const common: CommonOptions = { repo: v.repo ?? cwd, dataDir: v['data-dir'] ?? null, json: v.json ?? false };
  const one = (what: string): string => {
    if (rest.length !== 1 || !rest[0]) throw new UsageError(`forge ${command} takes exactly one ${what}.`);
    return rest[0];
  };
  const runOnly = ['name', 'max-iterations', 'model', 'auditor-model', 'variant', 'sandbox', 'no-sandbox', 'merge'] as const;
  if (command !== 'run' && command !== 'goal') {
    for (const k of runOnly) if (v[k] !== undefined) throw new UsageError(`--${k} applies to forge run and forge goal only.`);
  }
  const goalOnly = ['check', 'exists', 'contains', 'matches'] as const;
  if (command !== 'goal') {
    for (const k of goalOnly) {
      if (v[k] !== undefined) {
        throw new UsageError(command === 'run' ? `--${k} applies to forge goal only: a plan names its checks in its ## Verification part (and sections in Verify: lines).` : `--${k} applies to forge goal only.`);
      }
    }
  }
  if (command !== 'restart' && v.force) throw new UsageError('--force applies to forge restart only.');
  if (command !== 'run' && command !== 'goal' && command !== 'restart' && v.follow) throw new UsageError('--follow applies to forge run, forge goal and forge restart only.');

  switch (command) {
    case 'run':
      return { command, planPath: one('plan file'), ...common, ...runOptions(v as Record<string, string | boolean | undefined>) };
    case 'goal': {
      const goal = rest.join(' ').trim();
      if (!goal) throw new UsageError('forge goal needs the goal text, e.g. forge goal "make npm test pass".');
      const checks: GoalCheckArgs = { check: v.check ?? [], exists: v.exists ?? [], contains: v.contains ?? [], matches: v.matches ?? [] };
      return { command, goal, checks, ...common, ...runOptions(v as Record<string, string | boolean | undefined>) };
    }
    case 'status':
      if (rest.length > 1) throw new UsageError('forge status takes at most one loop name.');
      return { command, name: rest[0] ?? null, ...common };
    case 'findings':
      return { command, name: one('loop name'), ...common };
    case 'cancel':
      return { command, name: one('loop name'), ...common };
    case 'restart':
      return { command, name: one('loop name'), force: v.force ?? false, follow: v.follow ?? false, ...common };
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
  if (v.sandbox === true && v['no-sandbox'] === true) throw new UsageError('--sandbox and --no-sandbox contradict each other: give one.');
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
    sandbox: v.sandbox === true ? true : v['no-sandbox'] === true ? false : null,
    merge: (merge as RunOptions['merge']) ?? null,
    follow: v.follow === true,
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
