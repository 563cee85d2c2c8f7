/**
 * Command-line grammar of `forge`. Pure: argv in, a typed command or a usage error out.
 */
import { parseArgs } from 'node:util';
import type { TerminationReason } from '../core/loop/state';
import { capProblem } from '../core/groups/feature-split';
import { MAX_GROUP_CONCURRENCY, MIN_GROUP_CONCURRENCY } from '../core/vocabulary/group-vocabulary';

export const USAGE = `Usage:
  forge run PLAN.md      [options]   run a plan as an audited loop
  forge check PLAN.md    [--json]    check a plan without running it
  forge goal "TEXT"      [options]   run a goal loop (no sections, no final audit)
  forge plan "REQUEST"   [--out FILE] [--model P/M]
                                     the read-only architect drafts a plan of record
                                     (default file: ./forge-plan-ID.md)
  forge plan --continue ID "ANSWER"  answer the architect / ask for changes, in the
                                     same session (rewrites the draft's file)
  forge group PRD.md     [--name ID] [--max-concurrent N] [--launch]
                         [--budget X] [--budget-tokens N] [--model P/M]
                         [--splitter-model P/M] [--json]
                                     the read-only feature splitter splits a PRD
                                     into feature plans (kept for review under the
                                     data folder); --launch runs them at once
  forge group launch ID  [--max-concurrent N] [--budget X] [--budget-tokens N]
                                     run a reviewed group: its features as loops,
                                     at most N at once, dependencies first
  forge group resume ID  [--budget X] [--budget-tokens N]
                                     continue a paused group (a budget pause needs
                                     a budget above what its loops spent)
  forge group status [ID] [--json]   list feature groups, or show one
  forge group cancel ID              cancel a group and its running loops
  forge group merge ID --into BRANCH fast-forward BRANCH to a completed group's
                                     integration branch forge/group/ID (refused
                                     when BRANCH moved or its checkout is dirty)
  forge status [NAME]    [--json]    list loops (and feature groups), or show one
  forge findings NAME    [--json]    list a loop's review findings
  forge findings NAME --accept ID    accept (dismiss) finding ID, e.g. a
                                     "verification changed" only you can accept
  forge cancel NAME                  cancel a running loop
  forge restart NAME     [--force]   restart a loop that is not completed (also on
                                     other models or with a new budget: --model,
                                     --auditor-model, --variant, --budget …)

Options:
  --repo DIR               git repository (default: current directory)
  --name NAME              loop name (default: from the plan)
  --max-iterations N       iteration cap (0 = unlimited; default 15)
  --model PROVIDER/MODEL   coding model, or the architect's for forge plan
                           (default: your opencode configuration, else Forge's
                           embedded scripted model; forge plan needs a real one)
  --auditor-model P/M      audit model (default: --model)
  --variant NAME           variant of the coding model (reasoning effort, e.g.
                           high, max, minimal: see opencode models --verbose)
  --budget AMOUNT          money budget of the loop, e.g. 5.00 (USD as opencode
                           prices the models; default forge.budget.money)
  --budget-tokens N        token budget of the loop, e.g. 2000000
  --budget-auditor-share S share of the budget the auditor may spend (0..1,
                           e.g. 0.3; the coder gets the rest)
                           At 80 % Forge warns; at 100 % the loop pauses at the
                           next hand-over (exit 10) until restarted with more.
  --dry-run                run: print the plan's cost estimate and start nothing
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
  --no-handover            run, goal, restart: supervise the loop in this process
                           even when another Forge process (forge run, a VS Code
                           window) is the data folder's engine; by default the
                           loop is handed to it (forge.engine.shareProcess)
  --data-dir DIR           Forge data folder (or FORGE_DATA_DIR)
  --out FILE               plan: where to write the drafted plan (must not exist)
  --continue ID            plan: continue the draft ID (forge plan prints it)
  --max-concurrent N       group: loops run at once (1 to 16; default
                           forge.groups.maxConcurrentLoops, 3)
  --launch                 group: run the features right after the split,
                           without review
  --splitter-model P/M     group: the feature splitter's model (default: as
                           for loops; the embedded model splits PRDs written
                           as "## Feature <id>: <title>" sections)
                           A group's --budget / --budget-tokens cover all its
                           loops together: at 80 % Forge warns; at 100 % the
                           group pauses (exit 10) until resumed with more.
  --json                   one JSON object per line
  -h, --help               this text

Exit codes: 0 completed; 2 bad input; 3 cancelled; 4 max_iterations; 5 stalled;
6 model or agent failure (a group: a feature failed); 7 worktree failure;
8 opencode failure; 9 another process took over the loop; 10 paused: budget
reached; 1 internal error.`;

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
  /** Budget fields given on the command line (null: none given, the settings decide). */
  budget: BudgetArgs | null;
  /** --dry-run: print the estimate, start nothing. */
  dryRun: boolean;
  /** Print the agent's tool calls and messages as they happen (--follow). */
  follow: boolean;
  /** --no-handover: supervise the loop here even when the data folder has an engine. */
  noHandover: boolean;
}

/** `--budget`, `--budget-tokens`, `--budget-auditor-share` as given (absent fields: not given). */
export interface BudgetArgs {
  money?: number;
  tokens?: number;
  auditorShare?: number;
}

/** What `forge restart` may change besides taking over (issue 16). */
export interface RestartArgs {
  force: boolean;
  model: string | null;
  auditorModel: string | null;
  variant: string | null;
  budget: BudgetArgs | null;
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
  | ({ command: 'check'; planPath: string } & CommonOptions)
  | ({ command: 'goal'; goal: string; checks: GoalCheckArgs } & RunOptions)
  | ({ command: 'plan'; request: string; model: string | null; outPath: string | null; continueId: string | null } & CommonOptions)
  | ({ command: 'status'; name: string | null } & CommonOptions)
  | ({ command: 'findings'; name: string; accept: number | null } & CommonOptions)
  | ({ command: 'cancel'; name: string } & CommonOptions)
  | ({ command: 'restart'; name: string } & RestartArgs & { follow: boolean; noHandover: boolean } & CommonOptions)
  | ({ command: 'group' } & GroupArgs & CommonOptions);

/** `forge group …` (feature groups): a split of a PRD, or an action on a group by id. */
export interface GroupArgs {
  action: 'split' | 'launch' | 'resume' | 'status' | 'cancel' | 'merge';
  /** split: the PRD file; the others: the group id (status: null lists them all). */
  target: string | null;
  /** split: the group id (--name). */
  name: string | null;
  maxConcurrent: number | null;
  /** split: run at once, without review. */
  launch: boolean;
  /** Loop models (split) and the splitter's. */
  model: string | null;
  auditorModel: string | null;
  splitterModel: string | null;
  sandbox: boolean | null;
  budget: BudgetArgs | null;
  /** merge: the user's branch to bring the group's integration branch into (--into); absent for the other actions. */
  into?: string;
}

/** The actions `forge group ACTION ID` takes; any other first word is a PRD file. */
export const GROUP_ACTIONS = ['launch', 'resume', 'status', 'cancel', 'merge'] as const;

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
  into: 'a BRANCH',
  model: 'a PROVIDER/MODEL',
  'auditor-model': 'a PROVIDER/MODEL',
  variant: 'a variant name such as high',
  merge: 'never, fast-forward or merge',
  'data-dir': 'a folder',
  check: 'a shell command',
  exists: 'a path in the repository',
  contains: 'PATH:TEXT',
  matches: 'PATH:/REGEX/FLAGS',
  out: 'a file to write the plan to',
  continue: 'a plan draft id',
  budget: 'an amount above 0 such as 5.00',
  'budget-tokens': 'a whole number above 0 such as 2000000',
  'budget-auditor-share': 'a number from 0 to 1 such as 0.3',
  'max-concurrent': `a whole number from ${MIN_GROUP_CONCURRENCY} to ${MAX_GROUP_CONCURRENCY}`,
  'splitter-model': 'a PROVIDER/MODEL',
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
      if (option === 'max-concurrent') throw new UsageError(capProblem(Number(value))!);
      if (option.startsWith('budget')) throw new UsageError(`--${option} must be ${VALUE_OPTIONS[option]}, not "${value}".`);
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
        budget: { type: 'string' },
        'budget-tokens': { type: 'string' },
        'budget-auditor-share': { type: 'string' },
        'dry-run': { type: 'boolean' },
        'data-dir': { type: 'string' },
        check: { type: 'string', multiple: true },
        exists: { type: 'string', multiple: true },
        contains: { type: 'string', multiple: true },
        matches: { type: 'string', multiple: true },
        out: { type: 'string' },
        continue: { type: 'string' },
        json: { type: 'boolean' },
        force: { type: 'boolean' },
        follow: { type: 'boolean' },
        'no-handover': { type: 'boolean' },
        'max-concurrent': { type: 'string' },
        launch: { type: 'boolean' },
        'splitter-model': { type: 'string' },
        into: { type: 'string' },
        accept: { type: 'string' },
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
  for (const k of ['max-concurrent', 'launch', 'splitter-model', 'into'] as const) {
    if (command !== 'group' && v[k] !== undefined) throw new UsageError(`--${k} applies to forge group only.`);
  }
  if (command !== 'findings' && v.accept !== undefined) throw new UsageError('--accept applies to forge findings only.');
  if (command !== 'run' && command !== 'goal' && command !== 'restart' && v['no-handover']) throw new UsageError('--no-handover applies to forge run, forge goal and forge restart only.');
  if (command === 'group') return { command, ...groupOptions(v as Record<string, string | boolean | undefined>, rest), ...common };
  const runOnly = ['name', 'max-iterations', 'sandbox', 'no-sandbox', 'merge', 'dry-run'] as const;
  if (command !== 'run' && command !== 'goal') {
    for (const k of runOnly) if (v[k] !== undefined) throw new UsageError(`--${k} applies to forge run and forge goal only.`);
  }
  if (command !== 'plan') {
    for (const k of ['out', 'continue'] as const) if (v[k] !== undefined) throw new UsageError(`--${k} applies to forge plan only.`);
  }
  // Models and budget: chosen at the start, changed at a restart.
  const modelAndBudget = ['model', 'auditor-model', 'variant', 'budget', 'budget-tokens', 'budget-auditor-share'] as const;
  if (command !== 'run' && command !== 'goal' && command !== 'restart') {
    for (const k of modelAndBudget) {
      if (v[k] === undefined || (k === 'model' && command === 'plan')) continue;
      throw new UsageError(k === 'model' ? '--model applies to forge run, forge goal, forge restart and forge plan only.' : `--${k} applies to forge run, forge goal and forge restart only.`);
    }
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
    case 'check':
      return { command, planPath: one('plan file'), ...common };
    case 'plan': {
      const text = rest.join(' ').trim();
      const continueId = v.continue ?? null;
      if (continueId !== null && v.out !== undefined) throw new UsageError('--out is chosen when the draft starts; forge plan --continue rewrites the file the draft already has.');
      if (continueId !== null && v.model !== undefined) throw new UsageError('--model is chosen when the draft starts; forge plan --continue keeps the draft\'s model.');
      if (!text) {
        throw new UsageError(
          continueId === null
            ? 'forge plan needs the request: what you want planned, e.g. forge plan "add a --verbose flag to the CLI".'
            : `forge plan --continue ${continueId} needs your answer or change request, e.g. forge plan --continue ${continueId} "use the existing logger".`,
        );
      }
      const model = v.model ?? null;
      if (model !== null && !MODEL_RE.test(model)) throw new UsageError(`--model must be "provider/model" (for example anthropic/claude-sonnet-4-5), not "${model}".`);
      return { command, request: text, model, outPath: v.out ?? null, continueId, ...common };
    }
    case 'status':
      if (rest.length > 1) throw new UsageError('forge status takes at most one loop name.');
      return { command, name: rest[0] ?? null, ...common };
    case 'findings': {
      const accept = v.accept === undefined ? null : Number(v.accept);
      if (accept !== null && !(Number.isInteger(accept) && accept > 0)) throw new UsageError(`--accept takes a finding's number (forge findings NAME lists them), not "${v.accept}".`);
      return { command, name: one('loop name'), accept, ...common };
    }
    case 'cancel':
      return { command, name: one('loop name'), ...common };
    case 'restart': {
      const models = modelOptions(v as Record<string, string | boolean | undefined>);
      return { command, name: one('loop name'), force: v.force ?? false, ...models, budget: budgetOptions(v as Record<string, string | boolean | undefined>), follow: v.follow ?? false, noHandover: v['no-handover'] ?? false, ...common };
    }
    default:
      throw new UsageError(`Unknown command "${command}".`);
  }
}

/** `--model`, `--auditor-model`, `--variant`, checked. */
function modelOptions(v: Record<string, string | boolean | undefined>): { model: string | null; auditorModel: string | null; variant: string | null } {
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
  return {
    model: typeof v.model === 'string' ? v.model : null,
    auditorModel: typeof v['auditor-model'] === 'string' ? v['auditor-model'] : null,
    variant: typeof variant === 'string' ? variant : null,
  };
}

/** `--budget`, `--budget-tokens`, `--budget-auditor-share`, checked (null: none given). */
function budgetOptions(v: Record<string, string | boolean | undefined>): BudgetArgs | null {
  const budget: BudgetArgs = {};
  const money = v.budget;
  if (typeof money === 'string') {
    const n = Number(money);
    if (!/^\d+(\.\d+)?$|^\.\d+$/.test(money.trim()) || !(n > 0)) throw new UsageError(`--budget must be ${VALUE_OPTIONS.budget}, not "${money}".`);
    budget.money = n;
  }
  const tokens = v['budget-tokens'];
  if (typeof tokens === 'string') {
    const n = Number(tokens.replace(/_/g, ''));
    if (!/^\d[\d_]*$/.test(tokens.trim()) || !Number.isSafeInteger(n) || n <= 0) throw new UsageError(`--budget-tokens must be ${VALUE_OPTIONS['budget-tokens']}, not "${tokens}".`);
    budget.tokens = n;
  }
  const share = v['budget-auditor-share'];
  if (typeof share === 'string') {
    const n = Number(share);
    if (!/^\d*\.?\d+$/.test(share.trim()) || !(n >= 0 && n <= 1)) throw new UsageError(`--budget-auditor-share must be ${VALUE_OPTIONS['budget-auditor-share']}, not "${share}".`);
    budget.auditorShare = n;
  }
  return Object.keys(budget).length > 0 ? budget : null;
}

/** `forge group …`: which action, on what, and the options that apply to it (others are refused). */
function groupOptions(v: Record<string, string | boolean | undefined>, rest: string[]): GroupArgs {
  const first = rest[0];
  const action: GroupArgs['action'] = first !== undefined && (GROUP_ACTIONS as readonly string[]).includes(first) ? (first as GroupArgs['action']) : 'split';
  const args = action === 'split' ? rest : rest.slice(1);
  if (action === 'split' && args.length !== 1) throw new UsageError('forge group takes exactly one PRD file (or an action: forge group launch|resume|status|cancel ID).');
  if (action === 'merge' && (args.length !== 1 || typeof v.into !== 'string' || !v.into.trim())) {
    throw new UsageError('forge group merge takes one group id and the branch to merge into: forge group merge ID --into BRANCH.');
  }
  if ((action === 'launch' || action === 'resume' || action === 'cancel') && args.length !== 1) throw new UsageError(`forge group ${action} takes exactly one group id.`);
  if (action === 'status' && args.length > 1) throw new UsageError('forge group status takes at most one group id.');
  const allowed: Record<GroupArgs['action'], readonly string[]> = {
    split: ['name', 'max-concurrent', 'launch', 'budget', 'budget-tokens', 'model', 'auditor-model', 'splitter-model', 'sandbox', 'no-sandbox'],
    launch: ['max-concurrent', 'budget', 'budget-tokens'],
    resume: ['max-concurrent', 'budget', 'budget-tokens'],
    status: [],
    cancel: [],
    merge: ['into'],
  };
  const groupKeys = ['name', 'max-concurrent', 'launch', 'budget', 'budget-tokens', 'model', 'auditor-model', 'splitter-model', 'sandbox', 'no-sandbox', 'max-iterations', 'merge', 'dry-run', 'variant', 'budget-auditor-share', 'check', 'exists', 'contains', 'matches', 'out', 'continue', 'force', 'follow', 'into'];
  for (const k of groupKeys) {
    if (v[k] === undefined || allowed[action].includes(k)) continue;
    const where = action === 'split' ? 'forge group PRD.md' : `forge group ${action}`;
    throw new UsageError(`--${k} does not apply to ${where}.${allowed[action].length > 0 ? ` Its options: ${allowed[action].map((o) => `--${o}`).join(', ')}.` : ''}`);
  }
  let maxConcurrent: number | null = null;
  const mc = v['max-concurrent'];
  if (typeof mc === 'string') {
    const n = /^\d+$/.test(mc.trim()) ? Number(mc) : Number.NaN;
    const problem = capProblem(Number.isNaN(n) ? (mc as unknown as number) : n);
    if (problem) throw new UsageError(problem);
    maxConcurrent = n;
  }
  if (v.sandbox === true && v['no-sandbox'] === true) throw new UsageError('--sandbox and --no-sandbox contradict each other: give one.');
  const splitterModel = typeof v['splitter-model'] === 'string' ? v['splitter-model'] : null;
  if (splitterModel !== null && !MODEL_RE.test(splitterModel)) throw new UsageError(`--splitter-model must be "provider/model" (for example anthropic/claude-sonnet-4-5), not "${splitterModel}".`);
  const models = modelOptions(v);
  return {
    action,
    target: args[0] ?? null,
    name: typeof v.name === 'string' ? v.name : null,
    maxConcurrent,
    launch: v.launch === true,
    model: models.model,
    auditorModel: models.auditorModel,
    splitterModel,
    sandbox: v.sandbox === true ? true : v['no-sandbox'] === true ? false : null,
    budget: budgetOptions(v),
    ...(typeof v.into === 'string' ? { into: v.into.trim() } : {}),
  };
}

function runOptions(v: Record<string, string | boolean | undefined>): Omit<RunOptions, keyof CommonOptions> {
  let maxIterations: number | null = null;
  const mi = v['max-iterations'];
  if (typeof mi === 'string') {
    if (!/^\d+$/.test(mi)) throw new UsageError(`--max-iterations must be a whole number ≥ 0 (0 = unlimited), not "${mi}".`);
    maxIterations = Number(mi);
  }
  const models = modelOptions(v);
  if (v.sandbox === true && v['no-sandbox'] === true) throw new UsageError('--sandbox and --no-sandbox contradict each other: give one.');
  const merge = v.merge;
  if (typeof merge === 'string' && !['never', 'fast-forward', 'merge'].includes(merge)) {
    throw new UsageError(`--merge must be never, fast-forward or merge, not "${merge}".`);
  }
  return {
    name: typeof v.name === 'string' ? v.name : null,
    maxIterations,
    ...models,
    sandbox: v.sandbox === true ? true : v['no-sandbox'] === true ? false : null,
    merge: (merge as RunOptions['merge']) ?? null,
    budget: budgetOptions(v),
    dryRun: v['dry-run'] === true,
    follow: v.follow === true,
    noHandover: v['no-handover'] === true,
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
  budgetPaused: 10,
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
    case 'budget_reached':
      return EXIT.budgetPaused;
  }
}
