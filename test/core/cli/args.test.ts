import { strict as assert } from 'node:assert';
import { EXIT, exitCodeFor, parseCli, UsageError } from '../../../src/cli/args';
import { TERMINATION_KINDS, type TerminationReason } from '../../../src/core/loop/state';

const usage = (argv: string[], re: RegExp) =>
  assert.throws(() => parseCli(argv, '/cwd'), (e: unknown) => e instanceof UsageError && re.test(e.message));

describe('forge CLI arguments', () => {
  it('run with every option', () => {
    const c = parseCli(
      ['run', 'plan.md', '--repo', '/r', '--name', 'x', '--max-iterations', '0', '--model', 'a/b', '--auditor-model', 'c/d', '--variant', 'high', '--sandbox', '--merge', 'fast-forward', '--data-dir', '/d', '--json', '--follow', '--no-handover'],
      '/cwd',
    );
    assert.deepEqual(c, {
      command: 'run', planPath: 'plan.md', repo: '/r', dataDir: '/d', json: true, name: 'x', maxIterations: 0,
      model: 'a/b', auditorModel: 'c/d', variant: 'high', sandbox: true, merge: 'fast-forward', budget: null, dryRun: false, follow: true, noHandover: true,
    });
  });

  it('defaults: repo is the current directory', () => {
    const c = parseCli(['goal', 'make', 'tests', 'pass'], '/cwd');
    assert.equal(c.command, 'goal');
    if (c.command !== 'goal') return;
    assert.equal(c.goal, 'make tests pass');
    assert.equal(c.repo, '/cwd');
    assert.equal(c.maxIterations, null);
    assert.equal(c.sandbox, null, 'no flag: the settings decide (sandboxed where a driver works)');
  });

  it('--sandbox requires a sandbox, --no-sandbox turns it off, both together are refused', () => {
    assert.equal((parseCli(['run', 'p.md', '--sandbox'], '/c') as { sandbox: boolean | null }).sandbox, true);
    assert.equal((parseCli(['run', 'p.md', '--no-sandbox'], '/c') as { sandbox: boolean | null }).sandbox, false);
    usage(['run', 'p.md', '--sandbox', '--no-sandbox'], /--sandbox and --no-sandbox contradict/);
    usage(['status', '--no-sandbox'], /--no-sandbox applies to forge run and forge goal only/);
  });

  it('goal takes its contract: --check, --exists, --contains, --matches, each repeatable, in order', () => {
    const c = parseCli(['goal', 'ship it', '--check', 'npm test', '--check', 'node cli.js --version', '--exists', 'README.md', '--contains', 'README.md:## Usage', '--matches', 'src/a.ts:/^export/m'], '/cwd');
    assert.equal(c.command, 'goal');
    if (c.command !== 'goal') return;
    assert.deepEqual(c.checks, { check: ['npm test', 'node cli.js --version'], exists: ['README.md'], contains: ['README.md:## Usage'], matches: ['src/a.ts:/^export/m'] });
    const bare = parseCli(['goal', 'x'], '/cwd');
    assert.deepEqual((bare as { checks: unknown }).checks, { check: [], exists: [], contains: [], matches: [] });
    usage(['goal', 'x', '--check'], /--check needs a value: a shell command/);
    usage(['run', 'p.md', '--check', 'npm test'], /--check applies to forge goal only: a plan names its checks in its ## Verification part/);
    usage(['status', '--contains', 'a:b'], /--contains applies to forge goal only/);
  });

  it('plan: the request, --out, --model; --continue ID with the answer', () => {
    assert.deepEqual(parseCli(['plan', 'add', 'a', 'flag', '--out', 'p.md', '--model', 'a/b'], '/c'), {
      command: 'plan',
      request: 'add a flag',
      model: 'a/b',
      outPath: 'p.md',
      continueId: null,
      repo: '/c',
      dataDir: null,
      json: false,
    });
    const c = parseCli(['plan', '--continue', 'ab12cd34', 'use the logger'], '/c');
    assert.equal(c.command === 'plan' && c.continueId, 'ab12cd34');
    assert.equal(c.command === 'plan' && c.request, 'use the logger');
    usage(['plan'], /^forge plan needs the request: what you want planned/);
    usage(['plan', '   '], /^forge plan needs the request/);
    usage(['plan', '--continue', 'ab12cd34'], /^forge plan --continue ab12cd34 needs your answer or change request/);
    usage(['plan', '--continue'], /--continue needs a value: a plan draft id/);
    usage(['plan', '--continue', 'ab12cd34', 'x', '--out', 'o.md'], /--out is chosen when the draft starts/);
    usage(['plan', 'x', '--model', 'gpt4'], /--model must be "provider\/model"/);
    usage(['plan', 'x', '--max-iterations', '3'], /--max-iterations applies to forge run and forge goal only/);
    usage(['run', 'p.md', '--out', 'o.md'], /^--out applies to forge plan only\.$/);
    usage(['status', '--continue', 'x'], /^--continue applies to forge plan only\.$/);
  });

  it('status, findings, cancel, restart', () => {
    assert.deepEqual(parseCli(['status'], '/c'), { command: 'status', name: null, repo: '/c', dataDir: null, json: false });
    assert.equal((parseCli(['findings', 'l1'], '/c') as { name: string }).name, 'l1');
    assert.equal((parseCli(['findings', 'l1'], '/c') as { accept: number | null }).accept, null);
    assert.equal((parseCli(['findings', 'l1', '--accept', '7'], '/c') as { accept: number | null }).accept, 7);
    assert.throws(() => parseCli(['findings', 'l1', '--accept', 'x'], '/c'), /--accept takes a finding's number/);
    assert.throws(() => parseCli(['status', '--accept', '1'], '/c'), /--accept applies to forge findings only/);
    assert.deepEqual(parseCli(['tell', 'l1', 'use the', '--json', 'parser'], '/c'), { command: 'tell', name: 'l1', text: 'use the parser', repo: '/c', dataDir: null, json: true });
    usage(['tell', 'l1'], /forge tell needs a loop name and the message/);
    usage(['tell', 'l1', '  '], /forge tell needs a loop name and the message/);
    assert.equal((parseCli(['restart', 'l1', '--force'], '/c') as { force: boolean }).force, true);
    assert.equal((parseCli(['restart', 'l1', '--follow'], '/c') as { follow: boolean }).follow, true);
    assert.equal((parseCli(['goal', 'x', '--follow'], '/c') as { follow: boolean }).follow, true);
    assert.equal((parseCli(['run', 'p.md'], '/c') as { follow: boolean }).follow, false);
    usage(['status', '--follow'], /--follow applies to forge run, forge goal and forge restart only/);
    assert.equal(parseCli(['--help'], '/c').command, 'help');
    assert.equal(parseCli([], '/c').command, 'help');
  });

  it('restart takes other models, a variant and a new budget', () => {
    const c = parseCli(['restart', 'l1', '--model', 'p/m2', '--auditor-model', 'p/a2', '--variant', 'max', '--budget', '7.50', '--budget-tokens', '3000000'], '/c');
    assert.deepEqual(c, {
      command: 'restart', name: 'l1', force: false, follow: false, model: 'p/m2', auditorModel: 'p/a2', variant: 'max', budget: { money: 7.5, tokens: 3_000_000 }, repo: '/c', dataDir: null, json: false, noHandover: false,
    });
    const plain = parseCli(['restart', 'l1'], '/c');
    assert.deepEqual(plain, { command: 'restart', name: 'l1', force: false, follow: false, model: null, auditorModel: null, variant: null, budget: null, repo: '/c', dataDir: null, json: false, noHandover: false });
    assert.equal((parseCli(['restart', 'l1', '--no-handover'], '/c') as { noHandover: boolean }).noHandover, true);
    usage(['status', '--no-handover'], /--no-handover applies to forge run, forge goal and forge restart only/);
    usage(['group', 'p.md', '--no-handover'], /--no-handover applies to forge run, forge goal and forge restart only/);
    usage(['restart', 'l1', '--model', 'nomodel'], /--model must be "provider\/model"/);
  });

  it('budgets: --budget, --budget-tokens, --budget-auditor-share, --dry-run; bad ones are usage errors', () => {
    const c = parseCli(['run', 'p.md', '--budget', '5.00', '--budget-tokens', '2000000', '--budget-auditor-share', '0.3', '--dry-run'], '/c');
    assert.deepEqual((c as { budget: unknown }).budget, { money: 5, tokens: 2_000_000, auditorShare: 0.3 });
    assert.equal((c as { dryRun: boolean }).dryRun, true);
    assert.deepEqual((parseCli(['goal', 'x', '--budget', '.5'], '/c') as { budget: unknown }).budget, { money: 0.5 });
    assert.deepEqual((parseCli(['run', 'p.md', '--budget-auditor-share', '1'], '/c') as { budget: unknown }).budget, { auditorShare: 1 });
    assert.deepEqual((parseCli(['run', 'p.md', '--budget-tokens', '2_000_000'], '/c') as { budget: unknown }).budget, { tokens: 2_000_000 });
    for (const bad of ['-5', '-0.5', 'lots', '0', '0.00', '5e3', '$5', '1,5', 'NaN', 'Infinity', '']) {
      usage(['run', 'p.md', '--budget', bad], /--budget (must be an amount above 0 such as 5\.00|needs a value)/);
      usage(['run', 'p.md', `--budget=${bad}`], /--budget (must be an amount above 0 such as 5\.00|needs a value)/);
    }
    for (const bad of ['-1', '1.5', '0', 'many', '2M', '1e6']) usage(['run', 'p.md', '--budget-tokens', bad], /--budget-tokens must be a whole number above 0/);
    for (const bad of ['-0.1', '1.01', '2', 'half', '30%']) usage(['run', 'p.md', '--budget-auditor-share', bad], /--budget-auditor-share must be a number from 0 to 1/);
    usage(['status', '--budget', '5'], /--budget applies to forge run, forge goal and forge restart only/);
    usage(['findings', 'x', '--budget-tokens', '5'], /--budget-tokens applies to forge run, forge goal and forge restart only/);
  });

  it('rejects bad input with a message saying what is allowed', () => {
    usage(['run'], /exactly one plan file/);
    usage(['run', 'a.md', 'b.md'], /exactly one plan file/);
    usage(['goal'], /needs the goal text/);
    usage(['run', 'p.md', '--max-iterations=-2'], /whole number/);
    usage(['run', 'p.md', '--max-iterations', 'lots'], /whole number/);
    usage(['run', 'p.md', '--model', 'gpt4'], /provider\/model/);
    usage(['run', 'p.md', '--merge', 'force'], /never, fast-forward or merge/);
    usage(['run', 'p.md', '--variant', 'very high'], /--variant must be a variant name/);
    usage(['status', '--variant', 'high'], /--variant applies to forge run, forge goal and forge restart only/);
    usage(['status', '--force'], /--force applies to forge restart only/);
    usage(['cancel', 'x', '--model', 'a/b'], /^--model applies to forge run, forge goal, forge restart and forge plan only\.$/);
    usage(['restart', 'x', '--name', 'y'], /--name applies to forge run and forge goal only/);
    usage(['restart', 'x', '--dry-run'], /--dry-run applies to forge run and forge goal only/);
    usage(['explode'], /Unknown command "explode"/);
    usage(['run', 'p.md', '--bogus'], /bogus/);
  });

  it('an option value that looks like an option, or a missing value, is explained in Forge\'s words (not parseArgs\' "ambiguous")', () => {
    const exact = (argv: string[], message: string) =>
      assert.throws(() => parseCli(argv, '/cwd'), (e: unknown) => e instanceof UsageError && e.message === message);
    exact(['run', 'p.md', '--name', '-rf'], '--name needs a value (a loop name), but "-rf" looks like an option. Write --name=-rf if you mean it as the value.');
    exact(['run', 'p.md', '--max-iterations', '-1'], '--max-iterations must be a whole number ≥ 0 (0 = unlimited), not "-1".');
    exact(['run', 'p.md', '--repo', '--json'], '--repo needs a value (the folder of a git repository), but "--json" looks like an option. Write --repo=--json if you mean it as the value.');
    exact(['run', 'p.md', '--name'], '--name needs a value: a loop name.');
    exact(['run', 'p.md', '--model'], '--model needs a value: a PROVIDER/MODEL.');
    exact(['status', '--data-dir'], '--data-dir needs a value: a folder.');
    exact(['run', 'p.md', '--bogus'], 'Unknown option --bogus.');
    exact(['run', 'p.md', '-x'], 'Unknown option -x.');
    exact(['run', 'p.md', '--modle', 'a/b'], 'Unknown option --modle. Did you mean --model?');
    exact(['status', '--json=yes'], '--json takes no value (it is a switch): write --json alone.');
    // Every option that takes a value is covered, and nothing leaks parseArgs' wording.
    for (const option of ['repo', 'name', 'max-iterations', 'model', 'auditor-model', 'variant', 'merge', 'data-dir', 'budget', 'budget-tokens', 'budget-auditor-share']) {
      for (const argv of [['run', 'p.md', `--${option}`], ['run', 'p.md', `--${option}`, '-v']]) {
        assert.throws(() => parseCli(argv, '/cwd'), (e: unknown) => e instanceof UsageError && e.message.startsWith(`--${option} `) && !/ambiguous|argument missing/.test(e.message), argv.join(' '));
      }
    }
    // The explicit form still passes a value that starts with "-"; after "--" nothing is an option.
    assert.equal((parseCli(['run', 'p.md', '--name=-rf'], '/cwd') as { name: string }).name, '-rf');
    assert.equal((parseCli(['goal', '--', 'fix', '--name', '-rf'], '/cwd') as { goal: string }).goal, 'fix --name -rf');
  });

  it('every termination reason has an exit code; only completed is 0', () => {
    const codes = new Set<number>();
    for (const kind of TERMINATION_KINDS) {
      const reason = (kind === 'worktree_failed' || kind === 'error_max_retries' ? { kind, message: 'm' } : { kind }) as TerminationReason;
      const code = exitCodeFor(reason);
      assert.equal(code === 0, kind === 'completed', kind);
      codes.add(code);
    }
    assert.ok(codes.has(EXIT.stalled) && codes.has(EXIT.maxIterations) && codes.has(EXIT.cancelled));
    // A paused loop has a code of its own, different from every other ending.
    assert.equal(exitCodeFor({ kind: 'budget_reached' }), 10);
    assert.equal(Object.values(EXIT).filter((c) => c === EXIT.budgetPaused).length, 1);
  });
});

describe('forge group arguments', () => {
  const base = { repo: '/cwd', dataDir: null, json: false };
  it('a split with every option, and the actions by id', () => {
    assert.deepEqual(
      parseCli(['group', 'PRD.md', '--name', 'shop', '--max-concurrent', '2', '--launch', '--budget', '5', '--budget-tokens', '9000', '--model', 'a/b', '--auditor-model', 'c/d', '--splitter-model', 'e/f', '--no-sandbox'], '/cwd'),
      { command: 'group', action: 'split', target: 'PRD.md', name: 'shop', maxConcurrent: 2, launch: true, model: 'a/b', auditorModel: 'c/d', splitterModel: 'e/f', sandbox: false, budget: { money: 5, tokens: 9000 }, ...base },
    );
    const launch = parseCli(['group', 'launch', 'shop', '--max-concurrent', '16'], '/cwd');
    assert.equal(launch.command === 'group' && `${launch.action} ${launch.target} ${launch.maxConcurrent}`, 'launch shop 16');
    const resume = parseCli(['group', 'resume', 'shop', '--budget-tokens', '100'], '/cwd');
    assert.deepEqual(resume.command === 'group' && resume.budget, { tokens: 100 });
    const status = parseCli(['group', 'status', '--json'], '/cwd');
    assert.equal(status.command === 'group' && `${status.action} ${status.target}`, 'status null');
    const cancel = parseCli(['group', 'cancel', 'shop'], '/cwd');
    assert.equal(cancel.command === 'group' && cancel.action, 'cancel');
  });

  it('a cap outside 1..16, a missing PRD or id, and options that do not apply are usage errors', () => {
    usage(['group', 'PRD.md', '--max-concurrent', '0'], /^The number of loops a group runs at once must be a whole number from 1 to 16, not 0\.$/);
    usage(['group', 'PRD.md', '--max-concurrent', '1000'], /from 1 to 16, not 1000\./);
    usage(['group', 'PRD.md', '--max-concurrent', 'two'], /from 1 to 16, not two\./);
    usage(['group', 'PRD.md', '--max-concurrent', '-1'], /from 1 to 16, not -1\./);
    usage(['group'], /forge group takes exactly one PRD file/);
    usage(['group', 'launch'], /forge group launch takes exactly one group id/);
    usage(['group', 'cancel', 'a', 'b'], /forge group cancel takes exactly one group id/);
    usage(['group', 'launch', 'shop', '--launch'], /--launch does not apply to forge group launch\. Its options: --max-concurrent, --budget, --budget-tokens\./);
    usage(['group', 'status', '--budget', '5'], /--budget does not apply to forge group status\.$/);
    usage(['group', 'PRD.md', '--variant', 'high'], /--variant does not apply to forge group PRD\.md/);
    usage(['group', 'PRD.md', '--splitter-model', 'nope'], /--splitter-model must be "provider\/model"/);
    usage(['run', 'plan.md', '--max-concurrent', '2'], /--max-concurrent applies to forge group only/);
    usage(['status', '--launch'], /--launch applies to forge group only/);
  });
});
