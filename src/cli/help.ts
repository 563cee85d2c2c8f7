/**
 * What `forge` prints about itself: the overview (`forge --help`), each command's help
 * (`forge run --help`, `forge help run`), the short usage line after a usage error, and the
 * bash completion script (`forge completion`). Pure text from one table of commands and
 * options; the CLI imports it only when it prints one of them, so a start does not load it.
 * test/core/cli/help.test.ts holds it to what parseCli (args.ts) accepts.
 */
import { MAX_GROUP_CONCURRENCY, MIN_GROUP_CONCURRENCY } from '../core/vocabulary/group-vocabulary';
import type { HelpTopic, Verb } from './args';

interface OptionHelp {
  /** What the value is, as the help names it (absent: a switch). */
  arg?: string;
  text: string;
}

/** Every option, described once; a command may say more about one (CommandHelp.notes). */
export const OPTION_HELP: Readonly<Record<string, OptionHelp>> = {
  repo: { arg: 'DIR', text: 'git repository (default: current directory)' },
  'data-dir': { arg: 'DIR', text: 'Forge data folder (or FORGE_DATA_DIR)' },
  json: { text: 'one JSON object per line' },
  name: { arg: 'NAME', text: 'loop name (default: from the plan)' },
  'max-iterations': { arg: 'N', text: 'iteration cap (0 = unlimited; default 15)' },
  model: { arg: 'P/M', text: "coding model (default: your opencode configuration, else Forge's embedded scripted model)" },
  'auditor-model': { arg: 'P/M', text: 'audit model (default: --model)' },
  variant: { arg: 'NAME', text: 'variant of the coding model (reasoning effort, e.g. high, max, minimal: see opencode models --verbose)' },
  budget: { arg: 'AMOUNT', text: 'money budget, e.g. 5.00 (USD as opencode prices the models; default forge.budget.money)' },
  'budget-tokens': { arg: 'N', text: 'token budget, e.g. 2000000' },
  'budget-auditor-share': { arg: 'S', text: 'share of the budget the auditor may spend (0..1, e.g. 0.3; the coder gets the rest)' },
  'dry-run': { text: "print the plan's cost estimate and start nothing" },
  sandbox: { text: 'require a sandbox (refuse to start without one)' },
  'no-sandbox': { text: 'run unconfined (by default a loop is sandboxed where a driver works, else unconfined with a warning)' },
  merge: { arg: 'MODE', text: 'never | fast-forward | merge: what a completed loop does with its branch (default: never)' },
  check: { arg: 'CMD', text: 'a command that must exit 0 before the goal completes (repeatable; Forge runs it, not the model)' },
  exists: { arg: 'PATH', text: 'a file that must exist (repeatable)' },
  contains: { arg: 'PATH:TEXT', text: 'a file that must contain TEXT (repeatable)' },
  matches: { arg: 'PATH:/RE/', text: 'a file whose content must match (repeatable)' },
  follow: { text: 'also print what the agent does (one line per tool call, one per message it writes)' },
  'no-handover': {
    text: "supervise the loop in this process even when another Forge process (forge run, a VS Code window) is the data folder's engine; by default the loop is handed to it (forge.engine.shareProcess)",
  },
  out: { arg: 'FILE', text: 'where to write the drafted plan (must not exist; default DATA/plans/forge-plan-ID.md, outside your working tree)' },
  continue: { arg: 'ID', text: 'continue the draft ID (forge plan prints it)' },
  force: { text: 'take the loop over even when another process seems to supervise it' },
  'max-concurrent': { arg: 'N', text: `loops run at once (${MIN_GROUP_CONCURRENCY} to ${MAX_GROUP_CONCURRENCY}; default forge.groups.maxConcurrentLoops, 3)` },
  launch: { text: 'run the features right after the split, without review' },
  'splitter-model': { arg: 'P/M', text: 'the feature splitter\'s model (default: as for loops; the embedded model splits PRDs written as "## Feature <id>: <title>" sections)' },
  into: { arg: 'BRANCH', text: 'the branch to fast-forward to the group\'s integration branch' },
  comment: { arg: 'FILE:LINE[-END]', text: 'add a comment of your review on these lines (the text follows); it is a finding only you close' },
  severity: { arg: 'S', text: "the comment's severity: bug (default) or warning" },
  resolve: { arg: 'ID', text: 'resolve comment ID of your review' },
  dismiss: { arg: 'ID', text: 'dismiss comment ID of your review' },
  send: { text: 'send the open comments back to the loop: another coding pass, audit, checks and final audit' },
  accept: { arg: 'ID', text: 'accept (dismiss) finding ID, e.g. a "verification changed" only you can accept' },
  squash: { text: 'when the base cannot be fast-forwarded, one squashed commit (default: forge.accept.strategy)' },
  'merge-commit': { text: 'when the base cannot be fast-forwarded, a merge commit (default: forge.accept.strategy)' },
  remove: { text: "then remove the loop's worktree and branch" },
  push: { arg: 'REMOTE', text: "push the loop's branch to REMOTE with your git (merges nothing) and print the pull-request URL of a known host" },
};

/** Options every command takes. */
export const COMMON_OPTIONS = ['repo', 'data-dir', 'json'] as const;

/** One way to call a command: its usage line and the options it takes (besides COMMON_OPTIONS). */
export interface CommandForm {
  usage: string;
  /** What this form does, when the command has several. */
  does?: string;
  options: readonly string[];
  /** A valid call without options, for the tests that hold this table to parseCli. */
  example: readonly string[];
}

export interface CommandHelp {
  summary: string;
  forms: readonly CommandForm[];
  /** What an option means for this command, where it differs from OPTION_HELP. */
  optionText?: Readonly<Record<string, string>>;
  /** Paragraphs after the options. */
  notes?: readonly string[];
}

const LOOP_OPTIONS = ['name', 'max-iterations', 'model', 'auditor-model', 'variant', 'budget', 'budget-tokens', 'budget-auditor-share', 'dry-run', 'sandbox', 'no-sandbox', 'merge', 'follow', 'no-handover'] as const;
const BUDGET_NOTE = 'At 80 % of a budget Forge warns; at 100 % the loop pauses at the next hand-over (exit 10) until restarted with more.';

export const COMMANDS: Readonly<Record<Exclude<Verb, 'help'>, CommandHelp>> = {
  run: {
    summary: 'run a plan as an audited loop',
    forms: [{ usage: 'forge run PLAN.md [options]', options: LOOP_OPTIONS, example: ['run', 'plan.md'] }],
    notes: [
      'A loop works in a git worktree on a new branch forge/NAME: each section is coded, then audited; Forge commits it when its audit is clean and its checks pass, then the final audit reviews the whole.',
      BUDGET_NOTE,
    ],
  },
  check: {
    summary: 'check a plan without running it',
    forms: [{ usage: 'forge check PLAN.md [--json]', options: [], example: ['check', 'plan.md'] }],
    notes: ['Read-only: prints the problems forge run would refuse (errors, exit 2) or warn about.'],
  },
  goal: {
    summary: 'run a goal loop (no sections, no final audit)',
    forms: [{ usage: 'forge goal "TEXT" [options]', options: [...LOOP_OPTIONS, 'check', 'exists', 'contains', 'matches'], example: ['goal', 'make npm test pass'] }],
    notes: ['--check, --exists, --contains and --matches are the goal\'s contract: Forge checks them itself before the goal can complete.', BUDGET_NOTE],
  },
  plan: {
    summary: 'the read-only architect drafts a plan of record',
    forms: [
      { usage: 'forge plan "REQUEST" [--out FILE] [--model P/M]', does: 'start a draft', options: ['out', 'model'], example: ['plan', 'add a --verbose flag'] },
      { usage: 'forge plan --continue ID "ANSWER"', does: "answer the architect or ask for changes, in the same session (rewrites the draft's file)", options: ['continue'], example: ['plan', '--continue', 'ab12cd34', 'yes'] },
    ],
    optionText: { model: "the architect's model; it needs a real one (default: forge.model, else your opencode configuration)" },
  },
  group: {
    summary: 'split a PRD into feature plans and run them as a group',
    forms: [
      {
        usage: 'forge group PRD.md [options]',
        does: 'the read-only feature splitter splits a PRD into feature plans (kept for review under the data folder); --launch runs them at once',
        options: ['name', 'max-concurrent', 'launch', 'budget', 'budget-tokens', 'model', 'auditor-model', 'splitter-model', 'sandbox', 'no-sandbox'],
        example: ['group', 'prd.md'],
      },
      { usage: 'forge group launch ID [options]', does: 'run a reviewed group: its features as loops, at most N at once, dependencies first', options: ['max-concurrent', 'budget', 'budget-tokens'], example: ['group', 'launch', 'g1'] },
      { usage: 'forge group resume ID [options]', does: 'continue a paused group (a budget pause needs a budget above what its loops spent)', options: ['max-concurrent', 'budget', 'budget-tokens'], example: ['group', 'resume', 'g1'] },
      { usage: 'forge group status [ID] [--json]', does: 'list feature groups, or show one', options: [], example: ['group', 'status'] },
      { usage: 'forge group cancel ID', does: 'cancel a group and its running loops', options: [], example: ['group', 'cancel', 'g1'] },
      {
        usage: 'forge group merge ID --into BRANCH',
        does: "fast-forward BRANCH to a completed group's integration branch forge/group/ID (refused when BRANCH moved or its checkout is dirty)",
        options: ['into'],
        example: ['group', 'merge', 'g1', '--into', 'main'],
      },
    ],
    optionText: { name: "the group's id", into: "merge: the branch to fast-forward to the group's integration branch", 'max-concurrent': 'split, launch, resume: ' + OPTION_HELP['max-concurrent']!.text },
    notes: ["A group's --budget / --budget-tokens cover all its loops together: at 80 % Forge warns; at 100 % the group pauses (exit 10) until resumed with more."],
  },
  status: {
    summary: 'list loops (and feature groups), or show one',
    forms: [{ usage: 'forge status [NAME] [--json]', options: [], example: ['status'] }],
  },
  findings: {
    summary: "list a loop's review findings",
    forms: [
      { usage: 'forge findings NAME [--json]', options: [], example: ['findings', 'l1'] },
      { usage: 'forge findings NAME --accept ID', does: 'accept (dismiss) finding ID, e.g. a "verification changed" only you can accept', options: ['accept'], example: ['findings', 'l1', '--accept', '3'] },
    ],
  },
  review: {
    summary: "comment on a loop's work and send it back",
    forms: [
      { usage: 'forge review NAME [--json]', does: 'list the comments of your review, their status and the coder\'s answers', options: [], example: ['review', 'l1'] },
      { usage: 'forge review NAME --comment FILE:LINE[-END] "TEXT" [--severity S]', does: 'add a comment on those lines of the loop\'s worktree', options: ['comment', 'severity'], example: ['review', 'l1', '--comment', 'src/app.ts:12', 'handle the empty list'] },
      { usage: 'forge review NAME --resolve ID', does: 'resolve a comment; the last one of a loop awaiting review runs its final gate and completes it', options: ['resolve'], example: ['review', 'l1', '--resolve', '3'] },
      { usage: 'forge review NAME --dismiss ID', does: 'dismiss a comment (the same, without agreeing it is fixed)', options: ['dismiss'], example: ['review', 'l1', '--dismiss', '3'] },
      { usage: 'forge review NAME --send', does: 'reopen the loop (completed or stopped) for a coding pass whose prompt carries your open comments verbatim', options: ['send'], example: ['review', 'l1', '--send'] },
    ],
    notes: ['The loop cannot complete while a comment is open: when the coder has answered every one (its forge_review_reply), the loop waits in awaiting_review (exit 12) until you resolve them or send again. No agent can resolve or delete your comments.'],
  },
  accept: {
    summary: "merge a loop's branch into its base branch, or push it",
    forms: [
      { usage: 'forge accept NAME [options]', does: 'fast-forward the base branch when possible, else a merge commit or a squash', options: ['squash', 'merge-commit', 'remove'], example: ['accept', 'l1'] },
      { usage: 'forge accept NAME --push REMOTE', does: "push the loop's branch with your own git and print the compare / pull-request URL (github.com, gitlab.com, bitbucket.org)", options: ['push'], example: ['accept', 'l1', '--push', 'origin'] },
    ],
    notes: ["Refused, with nothing changed, while the loop runs, when your checkout of the base branch has uncommitted changes, or when the merge conflicts. Each accept is recorded (who, when, how, the commit) and shown by forge status NAME."],
  },
  cancel: {
    summary: 'cancel a running loop',
    forms: [{ usage: 'forge cancel NAME', options: [], example: ['cancel', 'l1'] }],
  },
  tell: {
    summary: "send a message to a running loop's agent",
    forms: [{ usage: 'forge tell NAME "TEXT"', options: [], example: ['tell', 'l1', 'use the existing parser'] }],
    notes: ['Goes into the running session at once, or into the next session\'s prompt when the loop is between sessions; the loop\'s supervising process (a forge run or a VS Code window) must be alive.'],
  },
  restart: {
    summary: 'restart a stopped loop (models, budget)',
    forms: [{ usage: 'forge restart NAME [options]', options: ['force', 'model', 'auditor-model', 'variant', 'budget', 'budget-tokens', 'budget-auditor-share', 'follow', 'no-handover'], example: ['restart', 'l1'] }],
    notes: [BUDGET_NOTE],
  },
  completion: {
    summary: 'print a bash completion script',
    forms: [{ usage: 'forge completion', options: [], example: ['completion'] }],
    notes: ['bash: source <(forge completion)   (or save it under ~/.local/share/bash-completion/completions/forge)', 'zsh, through its bash compatibility (not tested by Forge): autoload -U bashcompinit && bashcompinit && source <(forge completion)'],
  },
};

export const EXIT_CODES_TEXT = `Exit codes: 0 completed; 2 bad input; 3 cancelled; 4 max_iterations; 5 stalled;
6 model or agent failure (a group: a feature failed); 7 worktree failure;
8 opencode failure; 9 another process took over the loop; 10 paused: budget
reached; 11 setup_failed; 12 awaiting your review; 1 internal error.`;

const WIDTH = 80;
const OPTION_COLUMN = 25;

/** Words filled into lines of at most `width` characters, each line prefixed by `indent`. */
function fill(text: string, indent: number, width = WIDTH): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== '' && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((l) => ' '.repeat(indent) + l);
}

function optionLines(name: string, text?: string): string[] {
  const help = OPTION_HELP[name]!;
  const head = `  --${name}${help.arg ? ` ${help.arg}` : ''}`;
  const body = fill(text ?? help.text, OPTION_COLUMN);
  if (head.length < OPTION_COLUMN - 1) body[0] = head.padEnd(OPTION_COLUMN) + body[0]!.trimStart();
  else body.unshift(head);
  return body;
}

/** The options a command takes in any of its forms, in table order, besides the common ones. */
export function optionsOf(verb: Exclude<Verb, 'help'>): string[] {
  const all = new Set(COMMANDS[verb].forms.flatMap((f) => f.options));
  return Object.keys(OPTION_HELP).filter((o) => all.has(o));
}

/** `forge run --help`, `forge help run`. */
export function commandHelp(verb: Exclude<Verb, 'help'>): string {
  const c = COMMANDS[verb];
  const lines: string[] = [];
  if (c.forms.length === 1) {
    lines.push(`Usage: ${c.forms[0]!.usage}`, '', ...fill(`${c.summary.charAt(0).toUpperCase()}${c.summary.slice(1)}.`, 0));
  } else {
    lines.push(`forge ${verb}: ${c.summary}`, '', 'Usage:');
    for (const f of c.forms) lines.push(`  ${f.usage}`, ...(f.does ? fill(f.does, 6) : []));
  }
  const own = optionsOf(verb);
  if (own.length > 0) {
    lines.push('', 'Options:');
    for (const o of own) lines.push(...optionLines(o, c.optionText?.[o]));
  }
  if (verb !== 'completion') {
    lines.push('', 'Common options:');
    for (const o of COMMON_OPTIONS) lines.push(...optionLines(o));
  }
  for (const note of c.notes ?? []) lines.push('', ...fill(note, 0));
  if (verb === 'run' || verb === 'goal' || verb === 'restart' || verb === 'group') lines.push('', EXIT_CODES_TEXT);
  return lines.join('\n');
}

/** `forge --help`, `forge`: the commands, one line each, and where the details are. */
export function overviewHelp(): string {
  const lines = ['Forge runs a plan as an audited loop of coding agents in a git worktree.', '', 'Usage: forge COMMAND [options]', '', 'Commands:'];
  const column = 37;
  for (const c of Object.values(COMMANDS)) {
    // The first form; forge plan's and forge group's others are in their help.
    const usage = `  ${c.forms[0]!.usage.replace(/ \[options\]$/, '')}`;
    const summary = fill(c.summary, column);
    if (usage.length < column) summary[0] = usage.padEnd(column) + summary[0]!.trimStart();
    else summary.unshift(usage);
    lines.push(...summary);
  }
  lines.push('', 'Options of every command:');
  for (const o of COMMON_OPTIONS) lines.push(...optionLines(o));
  lines.push(`${'  -h, --help'.padEnd(OPTION_COLUMN)}this text; forge COMMAND --help: the command's options`, `${'  -V, --version'.padEnd(OPTION_COLUMN)}the version of this forge`);
  lines.push('', "forge help COMMAND (or forge COMMAND --help) shows a command's options.", '', EXIT_CODES_TEXT);
  return lines.join('\n');
}

/** After a usage error: the command's usage line(s) and where its help is (a few lines, not the whole help). */
export function usageHint(verb: Verb | null): string {
  if (verb === null || verb === 'help') return `Usage: forge COMMAND [options]   (commands: ${Object.keys(COMMANDS).join(', ')})\n"forge --help" lists the commands.`;
  const forms = COMMANDS[verb].forms;
  const usage = forms.length === 1 ? `Usage: ${forms[0]!.usage}` : ['Usage:', ...forms.map((f) => `  ${f.usage}`)].join('\n');
  return `${usage}\n"forge ${verb} --help" lists its options.`;
}

/** A bash completion script: commands, then each command's options (files otherwise). */
export function completionScript(): string {
  const verbs = Object.keys(COMMANDS) as Array<Exclude<Verb, 'help'>>;
  const cases = verbs.map((v) => `    ${v}) opts="${[...optionsOf(v), ...(v === 'completion' ? [] : COMMON_OPTIONS), 'help'].map((o) => `--${o}`).join(' ')}" ;;`);
  return [
    '# bash completion for forge (forge completion); zsh: autoload -U bashcompinit && bashcompinit first',
    '_forge() {',
    '  local cur="${COMP_WORDS[COMP_CWORD]}" verb="${COMP_WORDS[1]}" opts',
    '  if [ "$COMP_CWORD" -eq 1 ]; then',
    `    COMPREPLY=($(compgen -W "${[...verbs, 'help'].join(' ')} --help --version" -- "$cur"))`,
    '    return',
    '  fi',
    '  if [ "$verb" = help ]; then',
    `    COMPREPLY=($(compgen -W "${verbs.join(' ')}" -- "$cur"))`,
    '    return',
    '  fi',
    '  if [ "$verb" = group ] && [ "$COMP_CWORD" -eq 2 ] && [[ "$cur" != -* ]]; then',
    '    COMPREPLY=($(compgen -W "launch resume status cancel merge" -- "$cur") $(compgen -f -- "$cur"))',
    '    return',
    '  fi',
    '  case "$cur" in',
    '  -*)',
    '    case "$verb" in',
    ...cases.map((c) => `  ${c}`),
    '      *) opts="--help" ;;',
    '    esac',
    '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
    '    ;;',
    '  *) COMPREPLY=($(compgen -f -- "$cur")) ;;',
    '  esac',
    '}',
    'complete -o filenames -F _forge forge',
  ].join('\n');
}

/** The text `forge` prints for a help topic (the version is read by the caller). */
export function helpText(topic: HelpTopic, version: string): string {
  if (topic === 'overview') return overviewHelp();
  if (topic === 'version') return `forge ${version}`;
  if (topic === 'completion-script') return completionScript();
  return commandHelp(topic);
}
