// The pure builders behind the verification gate's VS Code surfaces (issue 13): Execute Goal's
// contract boxes, the Loop Explorer's Checks detail, check findings as diagnostics. No VS Code
// API here, so this file also runs under plain mocha.
import * as assert from 'node:assert/strict';
import { parseGoalCheckOptions } from '../../../src/core/checks/parse';
import type { CheckRunRow } from '../../../src/core/storage/repositories/check-runs-repository';
import { buildCheckViews, CHECK_RUNS_SHOWN } from '../../../src/vscode/dashboard/dashboard-model';
import { buildLoopDiagnostics, type DiagnosticFinding } from '../../../src/vscode/findings-diagnostics-model';
import { goalContractFromInput, goalContractProblems, hasGoalContract } from '../../../src/vscode/goal-contract';
import {
  buildLoopDetails,
  buildLoopNode,
  buildLoopTooltip,
  checkCountOf,
  isLoopLevelFindingPath,
  LOOP_LEVEL_FINDING_PATHS,
  summariseLoopChecks,
  type LoopSummary,
} from '../../../src/vscode/loop-tree-model';

function summary(extra: Partial<LoopSummary> = {}): LoopSummary {
  return {
    loop: {
      projectId: 'p',
      name: 'g',
      status: 'running',
      phase: 'auditing',
      kind: 'goal',
      iteration: 2,
      maxIterations: 10,
      sectionIndex: null,
      worktreeDir: '/wt/g',
      branch: 'forge/g',
      terminationReason: null,
      model: null,
      auditorModel: null,
      sandbox: false,
      supervisorId: 'x',
      leaseExpiresAt: null,
      updatedAt: 1,
      endedAt: null,
      state: {},
    },
    openFindings: { bug: 0, warning: 0 },
    usage: undefined,
    pseudoFindings: [],
    supervisedHere: true,
    ...extra,
  };
}

describe('goal contract input (Execute Goal)', () => {
  it('splits commands on ";" and reads file assertions the way forge goal takes them', () => {
    assert.deepEqual(goalContractFromInput('npm test; node cli.js --version;', 'README.md:## Usage; dist/cli.cjs; matches: src/a.ts:/export \\w+/i; exists: docs'), {
      check: ['npm test', 'node cli.js --version'],
      exists: ['dist/cli.cjs', 'docs'],
      contains: ['README.md:## Usage'],
      matches: ['src/a.ts:/export \\w+/i'],
    });
    const parsed = parseGoalCheckOptions(goalContractFromInput('npm test', 'README.md:## Usage'));
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(parsed.checks.map((c) => c.kind), ['command', 'contains']);
  });

  it('takes empty boxes as no contract', () => {
    const contract = goalContractFromInput('  ', '');
    assert.equal(hasGoalContract(contract), false);
    assert.equal(goalContractProblems(contract), null);
    assert.equal(hasGoalContract(goalContractFromInput('true', '')), true);
    assert.equal(hasGoalContract({}), false);
  });

  it('refuses an empty command between two ";" and a path outside the repository, in Forge\'s words', () => {
    const empty = goalContractProblems(goalContractFromInput('npm test;; true', ''));
    assert.match(empty ?? '', /^The goal has a check Forge cannot run:\n- --check option 2: /);
    const outside = goalContractProblems(goalContractFromInput('', '../secret.txt:password'));
    assert.match(outside ?? '', /--contains "\.\.\/secret\.txt:password"/);
    const absolute = goalContractProblems(goalContractFromInput('', '/etc/passwd'));
    assert.match(absolute ?? '', /--exists "\/etc\/passwd"/);
  });
});

describe('Loop Explorer checks', () => {
  it('counts passing, failing and never-run checks from the latest run of each', () => {
    assert.equal(summariseLoopChecks(0, []), undefined);
    assert.deepEqual(summariseLoopChecks(3, [{ label: 'npm test', status: 'passed' }, { label: 'lint', status: 'failed' }]), {
      total: 3,
      passed: 1,
      failing: ['lint'],
      notRun: 1,
    });
    // A cancelled run says nothing about the work; a timed-out one fails.
    assert.deepEqual(summariseLoopChecks(2, [{ label: 'a', status: 'cancelled' }, { label: 'b', status: 'timed-out' }]), { total: 2, passed: 0, failing: ['b'], notRun: 1 });
    assert.equal(checkCountOf({ state: { checks: [{}, {}] } }), 2);
    assert.equal(checkCountOf({ state: {} }), 0);
  });

  it('shows a Checks detail with a pass or error icon, and says it on the loop item and its tooltip', () => {
    const failing = summary({ checks: { total: 3, passed: 2, failing: ['npm test'], notRun: 0 } });
    const node = buildLoopNode(failing);
    const detail = buildLoopDetails(node).find((d) => d.label === 'Checks');
    assert.ok(detail, 'a Checks detail');
    assert.equal(detail.description, '2/3 passing, 1 failing');
    assert.equal(detail.icon?.id, 'error');
    assert.match(detail.tooltip ?? '', /Failing:\n- npm test/);
    assert.match(node.description ?? '', /✗ checks 2\/3/);
    assert.match(buildLoopTooltip(failing), /Checks: 2\/3 passing, 1 failing\n {2}failing: npm test/);

    const passing = buildLoopNode(summary({ checks: { total: 2, passed: 2, failing: [], notRun: 0 } }));
    assert.deepEqual(buildLoopDetails(passing).find((d) => d.label === 'Checks')?.icon, { id: 'pass', color: 'testing.iconPassed' });
    assert.equal(buildLoopDetails(passing).find((d) => d.label === 'Checks')?.description, '2/2 passing');
    const notRun = buildLoopNode(summary({ checks: { total: 1, passed: 0, failing: [], notRun: 1 } }));
    assert.equal(buildLoopDetails(notRun).find((d) => d.label === 'Checks')?.description, '0/1 passing, 1 not run yet');

    assert.equal(buildLoopDetails(buildLoopNode(summary())).find((d) => d.label === 'Checks'), undefined, 'no checks, no detail');
  });
});

describe('check findings as diagnostics', () => {
  const finding = (over: Partial<DiagnosticFinding>): DiagnosticFinding => ({
    id: 1,
    projectId: 'p',
    loopName: 'g',
    file: 'src/a.ts',
    line: 4,
    severity: 'bug',
    description: 'Check failed: npm test\nWritten in --check option 1; …',
    scenario: null,
    status: 'open',
    recurrenceCount: 1,
    sectionIndex: null,
    ...over,
  });

  it('puts a check finding naming a file on that file, and one without a file on the loop', () => {
    const { byFile, pseudo } = buildLoopDiagnostics('/wt/g', [finding({ id: 1 }), finding({ id: 2, file: '', line: 0 })]);
    const specs = byFile.get('/wt/g/src/a.ts')!;
    assert.deepEqual(specs.map((s) => [s.findingId, s.line, s.severity]), [[1, 3, 'error']]);
    assert.match(specs[0]!.message, /^Check failed: npm test/);
    assert.deepEqual(pseudo.map((f) => f.id), [2]);
    assert.equal([...byFile.keys()].length, 1, 'the fileless finding is not put on the worktree folder');
  });

  it('shows a fileless finding on the loop item as "Check", its first line as the description', () => {
    assert.ok(isLoopLevelFindingPath('') && isLoopLevelFindingPath('GOAL') && !isLoopLevelFindingPath('src/a.ts'));
    assert.ok(LOOP_LEVEL_FINDING_PATHS.includes(''));
    const node = buildLoopNode(summary({ pseudoFindings: [{ id: 7, file: '', severity: 'bug', description: 'Check failed: npm test\nOutput: …' }] }));
    assert.match(node.description ?? '', /⚑ Check/);
    const detail = buildLoopDetails(node).find((d) => d.id.endsWith('#pseudo-7'))!;
    assert.equal(detail.label, 'Check');
    assert.equal(detail.description, 'Check failed: npm test');
    assert.match(detail.tooltip ?? '', /^Bug about the loop: Check failed: npm test\nOutput/);
  });
});

describe('dashboard Checks part', () => {
  let nextId = 1;
  const run = (checkId: string, status: string, over: Partial<CheckRunRow> = {}): CheckRunRow => ({
    id: nextId++,
    projectId: 'p',
    loopName: 'g',
    iteration: 1,
    sectionIndex: null,
    gate: 'final',
    checkId,
    label: checkId === 'c1' ? 'npm test' : 'README.md contains "## Usage"',
    kind: checkId === 'c1' ? 'command' : 'contains',
    command: checkId === 'c1' ? 'npm test' : null,
    status,
    message: status === 'passed' ? 'exited 0' : 'exited 1',
    exitCode: status === 'passed' ? 0 : 1,
    signal: null,
    durationMs: 1200,
    outputTail: 'FAIL src/a.test.ts',
    outputBytes: 18,
    startedAt: 1000 + nextId,
    ...over,
  });

  it('lists each stored check in its order with its runs newest first, the output kept only where a run did not pass', () => {
    const specs = [
      { id: 'c1', label: 'npm test', kind: 'command', command: 'npm test' },
      { id: 'c2', label: 'README.md contains "## Usage"', kind: 'contains' },
      { id: 'c3', label: 'lint', kind: 'command', command: 'npm run lint' },
    ];
    const runs = [run('c2', 'failed', { iteration: 1 }), run('c1', 'failed', { iteration: 1 }), run('c1', 'passed', { iteration: 2 }), run('c2', 'passed', { iteration: 2 })];
    const views = buildCheckViews(specs, runs);
    assert.deepEqual(views.map((v) => [v.checkId, v.label, v.command, v.latestStatus, v.runs.map((r) => r.status)]), [
      ['c1', 'npm test', 'npm test', 'passed', ['passed', 'failed']],
      ['c2', 'README.md contains "## Usage"', null, 'passed', ['passed', 'failed']],
      ['c3', 'lint', 'npm run lint', null, []],
    ]);
    const c1 = views[0]!;
    assert.deepEqual(c1.runs.map((r) => [r.iteration, r.exitCode, r.durationMs, r.gate, r.outputTail]), [
      [2, 0, 1200, 'final', ''],
      [1, 1, 1200, 'final', 'FAIL src/a.test.ts'],
    ]);
  });

  it('keeps a check only the log knows, and sends only the latest runs of a long history', () => {
    const runs = Array.from({ length: CHECK_RUNS_SHOWN + 5 }, (_, i) => run('c1', i % 2 ? 'passed' : 'failed', { iteration: i + 1 }));
    const [view] = buildCheckViews([], runs);
    assert.equal(view!.label, 'npm test');
    assert.equal(view!.runs.length, CHECK_RUNS_SHOWN);
    assert.equal(view!.olderRuns, 5);
    assert.equal(view!.runs[0]!.iteration, CHECK_RUNS_SHOWN + 5);
    assert.deepEqual(buildCheckViews([], []), []);
  });
});
