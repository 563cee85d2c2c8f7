/**
 * What the user can do next with a loop that stopped (issue 29 item 7): a pure function of the
 * loop's status and termination reason. Every surface says the same thing from it: `forge run`
 * prints the CLI command lines when its loop ends, VS Code's notification offers the actions,
 * the Loop Explorer and the status bar mark (and count) the loops that wait for the user, the
 * dashboard leads with them and `@forge /status` names them.
 *
 * Two tables: which wait a stopped loop is in (by status, then reason), and which steps each
 * wait offers. A new status (e.g. `awaiting_review`, `setup_failed`) is one line in each.
 * No I/O; labels are English ids here, the VS Code layer localizes them.
 */
import { parseTerminationReason, type TerminationReason } from './state';

/** Why a loop waits for the user (or `running`: it does not; `cancelled`: the user stopped it). */
export type LoopWait =
  | 'running'
  | 'completed'
  | 'budget_paused'
  | 'max_iterations'
  | 'checks_failing'
  | 'stalled'
  | 'interrupted'
  | 'errored'
  | 'awaiting_review'
  | 'setup_failed'
  | 'cancelled';

/** One thing the user can do. `vscodeCommand` takes the loop ref `{ projectId, name }`. */
export type NextStepId = 'review' | 'accept' | 'restart' | 'raise_budget' | 'show_checks' | 'cancel' | 'read_answers' | 'send_review';

export interface NextStep {
  readonly id: NextStepId;
  /** VS Code command run with `{ projectId, name }`. */
  readonly vscodeCommand: string;
  /** The exact CLI line, with NAME filled in (placeholders in capitals only where Forge cannot know the value). */
  readonly cli: string;
}

export interface NextStepsInput {
  readonly name: string;
  /** Stored status (`starting` included) or any status a later version adds. */
  readonly status: string;
  /** The termination reason as stored (`kind: message`) or parsed; null while running. */
  readonly reason: TerminationReason | string | null;
  /** The loop's branch (null: it failed before its worktree, nothing to review or accept). */
  readonly branch: string | null;
  /** The loop's budget limits, to suggest a concrete higher budget (absent: placeholders). */
  readonly budget?: { readonly money: number | null; readonly tokens: number | null } | undefined;
  /** A completed loop whose work was accepted after it ended no longer waits. */
  readonly acceptedAfterEnd?: boolean;
}

export interface NextSteps {
  readonly wait: LoopWait;
  /** Whether the loop waits for the user (Explorer mark, status bar count). */
  readonly waiting: boolean;
  /** Whether its end deserves a notification (not when the user ended it). */
  readonly notify: boolean;
  /** Best first. */
  readonly steps: readonly NextStep[];
}

interface WaitRow {
  readonly waiting: boolean;
  readonly notify: boolean;
  /** Steps in order; `review` and `accept` are dropped for a loop without a branch. */
  readonly steps: readonly NextStepId[];
}

/** Which steps each wait offers. One row per wait. */
export const WAIT_TABLE: Readonly<Record<LoopWait, WaitRow>> = {
  running: { waiting: false, notify: false, steps: [] },
  completed: { waiting: true, notify: true, steps: ['review', 'accept'] },
  budget_paused: { waiting: true, notify: true, steps: ['raise_budget', 'review', 'cancel'] },
  max_iterations: { waiting: true, notify: true, steps: ['restart', 'review', 'accept'] },
  checks_failing: { waiting: true, notify: true, steps: ['show_checks', 'restart', 'review'] },
  stalled: { waiting: true, notify: true, steps: ['restart', 'review'] },
  interrupted: { waiting: true, notify: false, steps: ['restart', 'review'] },
  errored: { waiting: true, notify: true, steps: ['restart', 'review'] },
  // The coder answered every comment of the user's review: the user reads the answers and resolves them (or sends them back).
  awaiting_review: { waiting: true, notify: true, steps: ['read_answers', 'send_review'] },
  // The worktree's setup failed before the first session: fix what it names, then restart (setup runs again).
  setup_failed: { waiting: true, notify: true, steps: ['restart'] },
  cancelled: { waiting: false, notify: false, steps: ['restart', 'review', 'accept'] },
};

/** Which wait a status is in; a function where the reason decides. One line per status. */
const STATUS_TABLE: Readonly<Record<string, LoopWait | ((reason: TerminationReason | null) => LoopWait)>> = {
  starting: 'running',
  running: 'running',
  completed: 'completed',
  paused: 'budget_paused',
  stalled: 'stalled',
  awaiting_review: 'awaiting_review',
  setup_failed: 'setup_failed',
  cancelled: (r) => (r?.kind === 'shutdown' ? 'interrupted' : 'cancelled'),
  // `max_iterations: MESSAGE` says which check never passed.
  errored: (r) => (r?.kind === 'max_iterations' ? (r.message ? 'checks_failing' : 'max_iterations') : 'errored'),
};

function parsedReason(reason: NextStepsInput['reason']): TerminationReason | null {
  if (reason === null || typeof reason !== 'string') return reason;
  try {
    return parseTerminationReason(reason);
  } catch {
    return null;
  }
}

export function loopWaitOf(status: string, reason: NextStepsInput['reason']): LoopWait {
  const entry = STATUS_TABLE[status];
  if (entry === undefined) return 'errored';
  return typeof entry === 'string' ? entry : entry(parsedReason(reason));
}

/** A higher budget to suggest: twice each limit (money to the cent), or placeholders when unknown. */
export function raisedBudgetArgs(budget: NextStepsInput['budget']): string {
  const args: string[] = [];
  if (budget?.money) args.push(`--budget ${(Math.ceil(budget.money * 200) / 100).toFixed(2)}`);
  if (budget?.tokens) args.push(`--budget-tokens ${Math.ceil(budget.tokens * 2)}`);
  return args.length > 0 ? args.join(' ') : '--budget AMOUNT';
}

/** A loop name as one shell word (names are `[a-z0-9-]`; anything else is quoted). */
const shellWord = (s: string) => (/^[A-Za-z0-9._\/-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

function step(id: NextStepId, input: NextStepsInput): NextStep {
  const name = shellWord(input.name);
  switch (id) {
    case 'review':
      // What the loop's branch adds since it left the user's checkout (the base it started from).
      // VS Code: the multi-file diff, where a comment becomes a finding of the user's review.
      return { id, vscodeCommand: 'forge.reviewLoop', cli: `git diff ...${shellWord(input.branch ?? `forge/${input.name}`)}` };
    case 'read_answers':
      return { id, vscodeCommand: 'forge.reviewLoop', cli: `forge review ${name}` };
    case 'send_review':
      return { id, vscodeCommand: 'forge.review.send', cli: `forge review ${name} --send` };
    case 'accept':
      return { id, vscodeCommand: 'forge.acceptLoop', cli: `forge accept ${name}` };
    case 'restart':
      return { id, vscodeCommand: 'forge.restartLoop', cli: `forge restart ${name}` };
    case 'raise_budget':
      return { id, vscodeCommand: 'forge.restartLoop', cli: `forge restart ${name} ${raisedBudgetArgs(input.budget)}` };
    case 'show_checks':
      return { id, vscodeCommand: 'forge.openDashboard', cli: `forge status ${name}` };
    case 'cancel':
      return { id, vscodeCommand: 'forge.cancelLoop', cli: `forge cancel ${name}` };
  }
}

export function nextStepsOf(input: NextStepsInput): NextSteps {
  const wait = loopWaitOf(input.status, input.reason);
  const row = WAIT_TABLE[wait];
  const steps = row.steps.filter((id) => input.branch !== null || (id !== 'review' && id !== 'accept')).map((id) => step(id, input));
  const waiting = row.waiting && !(wait === 'completed' && input.acceptedAfterEnd === true);
  return { wait, waiting, notify: row.notify, steps };
}

/** The lines `forge run` / `goal` / `restart` end with: `next: COMMAND   (what it does)`. */
export function nextStepLines(steps: NextSteps): string[] {
  return steps.steps.map((s) => `next: ${s.cli}   (${STEP_TEXT[s.id]})`);
}

/** What each step does, in the CLI's words. */
export const STEP_TEXT: Readonly<Record<NextStepId, string>> = {
  review: "review the loop's changes",
  accept: 'merge its branch into the base branch',
  restart: 'continue it with a fresh iteration budget',
  raise_budget: 'continue it with a higher budget',
  show_checks: 'see which checks fail',
  cancel: 'end it, keeping its work',
  read_answers: "read the coder's answers, then resolve each comment with --resolve ID",
  send_review: 'send the open comments back for another coding pass',
};
