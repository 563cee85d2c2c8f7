/**
 * Command-line grammar of `forge`. Pure: argv in, a typed command or a usage error out.
 */
import { parseArgs } from 'node:util';
import { capProblem } from '../core/groups/feature-split';
import { MAX_GROUP_CONCURRENCY, MIN_GROUP_CONCURRENCY } from '../core/vocabulary/group-vocabulary';
import { editDistance } from '../core/config/settings';
import { parseCommentTarget } from '../core/review/review-decisions';

// The exit codes live beside the parser's callers' other vocabulary; re-exported for them.
export { EXIT, exitCodeFor } from './exit-codes';

/** The commands of `forge` (their help: help.ts). */
export const VERBS = ['run', 'check', 'goal', 'plan', 'group', 'status', 'findings', 'review', 'accept', 'cancel', 'tell', 'restart', 'completion', 'help'] as const;
export type Verb = (typeof VERBS)[number];

/**
 * What `forge` prints without opening anything: the overview (`forge --help`), a command's help
 * (`forge run --help`, `forge help run`), the version, the completion script.
 */
export type HelpTopic = 'overview' | 'version' | 'completion-script' | Exclude<Verb, 'help'>;

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

/** `forge review NAME …` (issue 29): list the user's comments, add one, settle one, or send them. */
export type ReviewAction =
  | { kind: 'list' }
  | { kind: 'comment'; file: string; line: number; lineEnd: number | null; text: string; severity: string }
  | { kind: 'resolve'; id: number }
  | { kind: 'dismiss'; id: number }
  | { kind: 'send' };

/** A goal's contract: checks Forge runs itself before the goal can complete (issue 13). */
export interface GoalCheckArgs {
  check: string[];
  exists: string[];
  contains: string[];
  matches: string[];
}

export type CliCommand =
  | { command: 'help'; topic: HelpTopic }
  | ({ command: 'run'; planPath: string } & RunOptions)
  | ({ command: 'check'; planPath: string } & CommonOptions)
  | ({ command: 'goal'; goal: string; checks: GoalCheckArgs } & RunOptions)
  | ({ command: 'plan'; request: string; model: string | null; outPath: string | null; continueId: string | null } & CommonOptions)
  | ({ command: 'status'; name: string | null } & CommonOptions)
  | ({ command: 'findings'; name: string; accept: number | null } & CommonOptions)
  | ({ command: 'accept'; name: string; squash: boolean; mergeCommit: boolean; remove: boolean; push: string | null } & CommonOptions)
  | ({ command: 'cancel'; name: string } & CommonOptions)
  | ({ command: 'tell'; name: string; text: string } & CommonOptions)
  | ({ command: 'review'; name: string; action: ReviewAction } & CommonOptions)
  | ({ command: 'restart'; name: string; review?: 'send' | 'final' } & RestartArgs & { follow: boolean; noHandover: boolean } & CommonOptions)
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
  /** The command the arguments were for (null: none or unknown), for the usage line after the message. */
  verb: Verb | null = null;
}

const MODEL_RE = /^[^/\s]+\/\S+$/;
const VARIANT_RE = /^[\w.-]+$/;

/** Options that take a value, with what the value is (as the help names it). */
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
  push: 'a REMOTE such as origin',
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
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    const near = option.startsWith('--') ? nearest(option.slice(2), Object.keys(PARSE_OPTIONS)) : null;
    return `Unknown option ${option}.${near ? ` Did you mean --${near}?` : ''}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option && /does not take an argument/.test(error.message)) {
    return `${option} takes no value (it is a switch): write ${option} alone.`;
  }
  return error.message;
}

const PARSE_OPTIONS = {
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
  squash: { type: 'boolean' },
  'merge-commit': { type: 'boolean' },
  remove: { type: 'boolean' },
  push: { type: 'string' },
  comment: { type: 'string' },
  severity: { type: 'string' },
  resolve: { type: 'string' },
  dismiss: { type: 'string' },
  send: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const;

/** The known word closest to `word` (a typo: within a third of its length, at least 2 edits), else null. */
export function nearest(word: string, known: readonly string[]): string | null {
  const budget = Math.max(2, Math.floor(word.length / 3));
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(word.toLowerCase(), k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return bestDistance <= budget ? best : null;
}

function unknownCommand(command: string): UsageError {
  const near = nearest(command, VERBS);
  return new UsageError(`Unknown command "${command}".${near ? ` Did you mean "${near}"?` : ''}`);
}

/** The first word that is not an option or an option's value: the command. */
function firstPositional(argv: readonly string[]): { word: string; at: number } | null {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return argv[i + 1] === undefined ? null : { word: argv[i + 1]!, at: i + 1 };
    if (!arg.startsWith('-') || arg === '-') return { word: arg, at: i };
    if (/^--[a-z-]+$/.test(arg) && arg.slice(2) in VALUE_OPTIONS) i++;
  }
  return null;
}

/** `--help`, `-h`, `--version`, `-V` before any "--", which win over everything else (no other check runs). */
function helpTopic(argv: readonly string[]): HelpTopic | null {
  const end = argv.indexOf('--');
  const flags = end === -1 ? argv : argv.slice(0, end);
  const has = (...names: string[]) => flags.some((a) => names.includes(a));
  if (has('--version', '-V')) return 'version';
  const first = firstPositional(argv);
  if (has('--help', '-h')) {
    if (first === null) return 'overview';
    if (first.word === 'help') return topicOf(firstPositional(argv.slice(first.at + 1))?.word ?? null);
    return topicOf(first.word);
  }
  if (first === null) return 'overview';
  if (first.word === 'help') {
    const rest = argv.slice(first.at + 1).filter((a) => !a.startsWith('-'));
    if (rest.length > 1) throw Object.assign(new UsageError('forge help takes at most one command, e.g. forge help run.'), { verb: 'help' as const });
    return topicOf(rest[0] ?? null);
  }
  return null;
}

function topicOf(word: string | null): HelpTopic {
  if (word === null || word === 'help') return 'overview';
  if (!(VERBS as readonly string[]).includes(word)) throw unknownCommand(word);
  return word as Exclude<Verb, 'help'>;
}

export function parseCli(argv: readonly string[], cwd: string): CliCommand {
  const first = firstPositional(argv)?.word;
  const verb = first !== undefined && (VERBS as readonly string[]).includes(first) ? (first as Verb) : null;
  try {
    return parseCommand(argv, cwd);
  } catch (error) {
    if (error instanceof UsageError && error.verb === null) error.verb = verb;
    throw error;
  }
}

function parseCommand(argv: readonly string[], cwd: string): CliCommand {
  const topic = helpTopic(argv);
  if (topic !== null) return { command: 'help', topic };
  checkOptionValues(argv);
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], allowPositionals: true, strict: true, options: PARSE_OPTIONS });
  } catch (e) {
    throw new UsageError(parseArgsMessage(e as Error & { code?: string }));
  }
  const { values: v, positionals } = parsed;
  const [command, ...rest] = positionals;
  // (helpTopic answered --help, --version, help and no command at all.)
  if (command === undefined) return { command: 'help', topic: 'overview' };
  if (command === 'completion') {
    if (rest.length > 0 || Object.values(v).some((x) => x !== undefined)) throw new UsageError('forge completion takes no arguments or options (it prints a bash completion script).');
    return { command: 'help', topic: 'completion-script' };
  }

  const common: CommonOptions = { repo: v.repo ?? cwd, dataDir: v['data-dir'] ?? null, json: v.json ?? false };
  const one = (what: string): string => {
    if (rest.length !== 1 || !rest[0]) throw new UsageError(`forge ${command} takes exactly one ${what}.`);
    return rest[0];
  };
  for (const k of ['max-concurrent', 'launch', 'splitter-model', 'into'] as const) {
    if (command !== 'group' && v[k] !== undefined) throw new UsageError(`--${k} applies to forge group only.`);
  }
  if (command !== 'findings' && v.accept !== undefined) throw new UsageError('--accept applies to forge findings only.');
  for (const k of ['squash', 'merge-commit', 'remove', 'push'] as const) {
    if (command !== 'accept' && v[k] !== undefined) throw new UsageError(`--${k} applies to forge accept only.`);
  }
  for (const k of ['comment', 'severity', 'resolve', 'dismiss', 'send'] as const) {
    if (command !== 'review' && v[k] !== undefined) throw new UsageError(`--${k} applies to forge review only.`);
  }
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
    case 'accept': {
      if (v.squash && v['merge-commit']) throw new UsageError('--squash and --merge-commit exclude each other: pick one (default: the forge.accept.strategy setting).');
      const push = v.push ?? null;
      if (push !== null && (v.squash || v['merge-commit'] || v.remove)) throw new UsageError('--push pushes the branch and merges nothing: it takes no --squash, --merge-commit or --remove.');
      if (push !== null && !/^[A-Za-z0-9][\w.\-/]*$/.test(push)) throw new UsageError(`--push takes a remote's name (git remote lists them), not "${push}".`);
      return { command, name: one('loop name'), squash: v.squash ?? false, mergeCommit: v['merge-commit'] ?? false, remove: v.remove ?? false, push, ...common };
    }
    case 'cancel':
      return { command, name: one('loop name'), ...common };
    case 'review':
      return { command, ...reviewOptions(v as Record<string, string | boolean | undefined>, rest), ...common };
    case 'tell': {
      const [name, ...words] = rest;
      const text = words.join(' ');
      if (!name || text.trim() === '') throw new UsageError('forge tell needs a loop name and the message, e.g. forge tell l1 "use the existing parser".');
      return { command, name, text, ...common };
    }
    case 'restart': {
      const models = modelOptions(v as Record<string, string | boolean | undefined>);
      return { command, name: one('loop name'), force: v.force ?? false, ...models, budget: budgetOptions(v as Record<string, string | boolean | undefined>), follow: v.follow ?? false, noHandover: v['no-handover'] ?? false, ...common };
    }
    default:
      throw unknownCommand(command);
  }
}

/** `forge review NAME [--comment FILE:LINE[-END] "TEXT" [--severity S] | --resolve ID | --dismiss ID | --send]`, checked. */
function reviewOptions(v: Record<string, string | boolean | undefined>, rest: string[]): { name: string; action: ReviewAction } {
  const [name, ...words] = rest;
  if (!name) throw new UsageError('forge review needs the loop name, e.g. forge review l1.');
  const chosen = (['comment', 'resolve', 'dismiss', 'send'] as const).filter((k) => v[k] !== undefined);
  if (chosen.length > 1) throw new UsageError(`--${chosen.join(', --')} exclude each other: one action at a time.`);
  if (v.severity !== undefined && v.comment === undefined) throw new UsageError('--severity applies to --comment only.');
  const action = chosen[0];
  if (action !== 'comment' && words.length > 0) throw new UsageError(`forge review takes the loop name only${action ? ` with --${action}` : ''}; a comment's text goes with --comment FILE:LINE "TEXT".`);
  const id = (k: 'resolve' | 'dismiss'): number => {
    const n = Number(v[k]);
    if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--${k} takes a comment's number (forge review ${name} lists them), not "${String(v[k])}".`);
    return n;
  };
  switch (action) {
    case undefined:
      return { name, action: { kind: 'list' } };
    case 'send':
      return { name, action: { kind: 'send' } };
    case 'resolve':
    case 'dismiss':
      return { name, action: { kind: action, id: id(action) } };
    case 'comment': {
      const target = parseCommentTarget(String(v.comment));
      if (!target.ok) throw new UsageError(`--comment takes FILE:LINE or FILE:LINE-END (lines from 1): ${target.message}`);
      const text = words.join(' ');
      if (text.trim() === '') throw new UsageError(`forge review ${name} --comment ${String(v.comment)} needs the comment's text, e.g. "this must handle an empty list".`);
      const severity = String(v.severity ?? 'bug');
      if (severity !== 'bug' && severity !== 'warning') throw new UsageError(`--severity is bug or warning, not "${severity}".`);
      return { name, action: { kind: 'comment', ...target.value, text, severity } };
    }
  }
  throw new UsageError('forge review: unknown action.');
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
