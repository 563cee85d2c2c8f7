import { strict as assert } from 'node:assert';
import { EXIT, exitCodeFor, parseCli, UsageError } from '../../../src/cli/args';
import { TERMINATION_KINDS, type TerminationReason } from '../../../src/core/loop/state';

const usage = (argv: string[], re: RegExp) =>
  assert.throws(() => parseCli(argv, '/cwd'), (e: unknown) => e instanceof UsageError && re.test(e.message));

describe('forge CLI arguments', () => {
  it('run with every option', () => {
    const c = parseCli(
      ['run', 'plan.md', '--repo', '/r', '--name', 'x', '--max-iterations', '0', '--model', 'a/b', '--auditor-model', 'c/d', '--variant', 'high', '--sandbox', '--merge', 'fast-forward', '--data-dir', '/d', '--json', '--follow'],
      '/cwd',
    );
    assert.deepEqual(c, {
      command: 'run', planPath: 'plan.md', repo: '/r', dataDir: '/d', json: true, name: 'x', maxIterations: 0,
      model: 'a/b', auditorModel: 'c/d', variant: 'high', sandbox: true, merge: 'fast-forward', follow: true,
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

  it('status, findings, cancel, restart', () => {
    assert.deepEqual(parseCli(['status'], '/c'), { command: 'status', name: null, repo: '/c', dataDir: null, json: false });
    assert.equal((parseCli(['findings', 'l1'], '/c') as { name: string }).name, 'l1');
    assert.equal((parseCli(['restart', 'l1', '--force'], '/c') as { force: boolean }).force, true);
    assert.equal((parseCli(['restart', 'l1', '--follow'], '/c') as { follow: boolean }).follow, true);
    assert.equal((parseCli(['goal', 'x', '--follow'], '/c') as { follow: boolean }).follow, true);
    assert.equal((parseCli(['run', 'p.md'], '/c') as { follow: boolean }).follow, false);
    usage(['status', '--follow'], /--follow applies to forge run, forge goal and forge restart only/);
    assert.equal(parseCli(['--help'], '/c').command, 'help');
    assert.equal(parseCli([], '/c').command, 'help');
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
    usage(['status', '--variant', 'high'], /applies to forge run and forge goal only/);
    usage(['status', '--force'], /--force applies to forge restart only/);
    usage(['cancel', 'x', '--model', 'a/b'], /applies to forge run and forge goal only/);
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
    exact(['run', 'p.md', '--bogus'], 'Unknown option --bogus. "forge --help" lists the options.');
    exact(['run', 'p.md', '-x'], 'Unknown option -x. "forge --help" lists the options.');
    exact(['status', '--json=yes'], '--json takes no value (it is a switch): write --json alone.');
    // Every option that takes a value is covered, and nothing leaks parseArgs' wording.
    for (const option of ['repo', 'name', 'max-iterations', 'model', 'auditor-model', 'variant', 'merge', 'data-dir']) {
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
  });
});
