import { strict as assert } from 'node:assert';
import { EXIT, exitCodeFor, parseCli, UsageError } from '../../../src/cli/args';
import { TERMINATION_KINDS, type TerminationReason } from '../../../src/core/loop/state';

const usage = (argv: string[], re: RegExp) =>
  assert.throws(() => parseCli(argv, '/cwd'), (e: unknown) => e instanceof UsageError && re.test(e.message));

describe('forge CLI arguments', () => {
  it('run with every option', () => {
    const c = parseCli(
      ['run', 'plan.md', '--repo', '/r', '--name', 'x', '--max-iterations', '0', '--model', 'a/b', '--auditor-model', 'c/d', '--variant', 'high', '--sandbox', '--merge', 'fast-forward', '--data-dir', '/d', '--json'],
      '/cwd',
    );
    assert.deepEqual(c, {
      command: 'run', planPath: 'plan.md', repo: '/r', dataDir: '/d', json: true, name: 'x', maxIterations: 0,
      model: 'a/b', auditorModel: 'c/d', variant: 'high', sandbox: true, merge: 'fast-forward',
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

  it('status, findings, cancel, restart', () => {
    assert.deepEqual(parseCli(['status'], '/c'), { command: 'status', name: null, repo: '/c', dataDir: null, json: false });
    assert.equal((parseCli(['findings', 'l1'], '/c') as { name: string }).name, 'l1');
    assert.equal((parseCli(['restart', 'l1', '--force'], '/c') as { force: boolean }).force, true);
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
