import { strict as assert } from 'node:assert';
import { checkFinding, checkFindingFingerprint, extractFileLocations, summariseCheckResults } from '../../../src/core/checks/evaluate';
import { parseGoalCheckOptions, parseSectionChecks, parseVerificationChecks } from '../../../src/core/checks/parse';
import type { CheckResult, CheckSpec } from '../../../src/core/checks/types';

const WT = '/home/dev/.forge/worktrees/greeting-cli';

/** Outputs captured from the real tools (node 20, tsc 5, mocha 10, pytest 9, python 3), with the worktree's path put in. */
const OUTPUTS = {
  nodeUncaught: `${WT}/src/greet.js:2
  if (!name) throw new Error('name is required');
             ^

Error: name is required
    at greet (${WT}/src/greet.js:2:20)
    at Object.<anonymous> (${WT}/cli.js:2:13)
    at Module._compile (node:internal/modules/cjs/loader:1521:14)
    at Module._extensions..js (node:internal/modules/cjs/loader:1623:10)
    at Function.executeUserEntryPoint [as runMain] (node:internal/modules/run_main:164:12)
    at node:internal/main/run_main_module:28:49

Node.js v20.20.2
`,
  nodeEsm: `node:internal/modules/run_main:123
    triggerUncaughtException(
    ^

AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

2 !== 3

    at file://${WT}/esm.mjs:2:8
    at ModuleJob.run (node:internal/modules/esm/module_job:325:25)
    at async ModuleLoader.import (node:internal/modules/esm/loader:606:24) {
  generatedMessage: true,
  code: 'ERR_ASSERTION',
}

Node.js v20.20.2
`,
  tsc: `src/bad.ts(4,7): error TS2322: Type 'number' is not assignable to type 'string'.
src/other.ts(10,1): error TS1005: ';' expected.
`,
  tscPretty:
    "\u001b[96msrc/bad.ts\u001b[0m:\u001b[93m4\u001b[0m:\u001b[93m7\u001b[0m - \u001b[91merror\u001b[0m\u001b[90m TS2322: \u001b[0mType 'number' is not assignable to type 'string'.\n\n\u001b[7m4\u001b[0m const x: string = add(1, 2);\n\nFound 1 error in src/bad.ts\u001b[90m:4\u001b[0m\n",
  mocha: `

  greet
    1) greets bob


  0 passing (11ms)
  1 failing

  1) greet
       greets bob:

      AssertionError [ERR_ASSERTION]: 'hello bob' == 'hi bob'
      + expected - actual

      -hello bob
      +hi bob
      
      at Context.<anonymous> (test/greet.test.js:5:12)
      at process.processImmediate (node:internal/timers:483:21)

`,
  mochaDependencyFirst: `  1) parser
       reads:
     TypeError: Cannot read properties of undefined (reading 'x')
      at walk (${WT}/node_modules/acorn/dist/acorn.js:5712:11)
      at parse (${WT}/src/parser.ts:31:7)
      at Context.<anonymous> (${WT}/test/parser.test.ts:12:5)
`,
  pytest: `FF                                                                       [100%]
=================================== FAILURES ===================================
___________________________________ test_div ___________________________________

    def test_div():
>       assert div(4, 2) == 3
E       assert 2.0 == 3
E        +  where 2.0 = div(4, 2)

tests/test_calc.py:4: AssertionError
__________________________________ test_zero ___________________________________

a = 1, b = 0

    def div(a, b):
>       return a / b
E       ZeroDivisionError: division by zero

calc.py:2: ZeroDivisionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_div - assert 2.0 == 3
FAILED tests/test_calc.py::test_zero - ZeroDivisionError: division by zero
2 failed in 1.42s
`,
  pythonTraceback: `Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/usr/lib/python3.12/runpy.py", line 88, in _run_code
  File "${WT}/calc.py", line 2, in div
    return a / b
ZeroDivisionError: division by zero
`,
  noFiles: `bash: line 1: forge-no-such-command: command not found
listening on 127.0.0.1:8080 at 12:30:45
see https://example.com/docs/x.js:12 and http://localhost:3000/a.ts:4
node:internal/modules/cjs/loader:1228
${WT}/../elsewhere/x.js:3:1
/etc/hosts.txt:1
`,
};

describe('checks: the path:line an output names', () => {
  const table: Array<[keyof typeof OUTPUTS, Array<[string, number, number?]>]> = [
    // src/greet.js:2:20 in the stack is the same place as the first line's src/greet.js:2: named once.
    ['nodeUncaught', [['src/greet.js', 2], ['cli.js', 2, 13]]],
    ['nodeEsm', [['esm.mjs', 2, 8]]],
    ['tsc', [['src/bad.ts', 4, 7], ['src/other.ts', 10, 1]]],
    ['tscPretty', [['src/bad.ts', 4, 7]]],
    ['mocha', [['test/greet.test.js', 5, 12]]],
    ['mochaDependencyFirst', [['src/parser.ts', 31, 7], ['test/parser.test.ts', 12, 5]]],
    ['pytest', [['tests/test_calc.py', 4], ['calc.py', 2]]],
    ['pythonTraceback', [['calc.py', 2]]],
    ['noFiles', []],
  ];
  for (const [name, expected] of table) {
    it(`${name}: ${expected.map(([f, l]) => `${f}:${l}`).join(', ') || 'none'}`, () => {
      const found = extractFileLocations(OUTPUTS[name], WT).map((l) => (l.column === undefined ? [l.file, l.line] : [l.file, l.line, l.column]));
      assert.deepEqual(found, expected);
    });
  }

  it('reads a 64 KiB tail of one long line in linear time (a path-first regular expression took seconds)', () => {
    for (const output of ['x'.repeat(65_536), 'a/'.repeat(32_768), 'x('.repeat(32_768), `${'x'.repeat(65_530)}.ts:1`, 'a.ts:1'.repeat(10_000)]) {
      const started = performance.now();
      extractFileLocations(output, WT);
      const ms = performance.now() - started;
      assert.ok(ms < 250, `${ms.toFixed(0)} ms for ${output.slice(0, 12)}…`);
    }
  });

  it('keeps only files the caller says are in the worktree', () => {
    const found = extractFileLocations(OUTPUTS.mochaDependencyFirst, WT, (path) => path.startsWith('test/'));
    assert.deepEqual(found, [{ file: 'test/parser.test.ts', line: 12, column: 5 }]);
  });

  it('accepts a worktree path given with a trailing slash, and decodes a file URL', () => {
    assert.deepEqual(extractFileLocations(`at file://${WT}/my%20dir/a.mjs:3:4`, `${WT}/`), [{ file: 'my dir/a.mjs', line: 3, column: 4 }]);
  });
});

function result(spec: CheckSpec, over: Partial<CheckResult>): CheckResult {
  return {
    checkId: spec.id,
    label: spec.label,
    kind: spec.kind,
    status: 'passed',
    message: 'exited with code 0',
    exitCode: 0,
    signal: null,
    startedAt: 1_700_000_000_000,
    durationMs: 3_200,
    outputTail: '',
    outputBytes: 0,
    outputTruncated: false,
    ...over,
  };
}

describe('checks: summary', () => {
  const [a, b, c] = parseVerificationChecks('- `npm test`\n- `node cli.js bob`\n- exists: dist/cli.cjs').checks as [CheckSpec, CheckSpec, CheckSpec];

  it('says all passed, or which failed and how', () => {
    assert.deepEqual(summariseCheckResults([]), { passed: true, total: 0, passedCount: 0, failed: [], text: 'No checks to run.' });
    assert.equal(summariseCheckResults([result(a, {})]).text, 'The check passed.');
    const all = summariseCheckResults([result(a, {}), result(b, {}), result(c, { message: 'dist/cli.cjs exists' })]);
    assert.deepEqual([all.passed, all.total, all.passedCount, all.failed, all.text], [true, 3, 3, [], 'All 3 checks passed.']);
    const failing = [
      result(a, { status: 'failed', exitCode: 1, message: 'exited with code 1' }),
      result(b, { status: 'timed-out', exitCode: null, signal: 'SIGTERM', message: 'timed out after 600000 ms; Forge killed it and everything it started' }),
      result(c, { status: 'failed', message: 'dist/cli.cjs does not exist in the worktree' }),
    ];
    const summary = summariseCheckResults([...failing, result(a, { checkId: 'plan-4', label: 'check 4: true' })]);
    assert.equal(summary.passed, false);
    assert.equal(summary.passedCount, 1);
    assert.deepEqual(summary.failed, failing);
    assert.equal(
      summary.text,
      '3 of 4 checks failed: check 1: npm test (exited with code 1); check 2: node cli.js bob (timed out after 600000 ms; Forge killed it and everything it started); check 3: exists: dist/cli.cjs (dist/cli.cjs does not exist in the worktree).',
    );
  });

  it('counts a check that could not start or was refused as failed', () => {
    const summary = summariseCheckResults([result(a, { status: 'not-started', exitCode: 127, message: 'command not found (exit 127)' }), result(c, { status: 'refused', message: 'x' })]);
    assert.equal(summary.passed, false);
    assert.equal(summary.failed.length, 2);
  });
});

describe('checks: the finding a failed check becomes', () => {
  const spec = parseVerificationChecks('```sh\nnpm test\n```').checks[0]!;

  it('is a bug from source "check" with the command, exit code, output tail and the file:line the output names', () => {
    const finding = checkFinding(
      spec,
      result(spec, { status: 'failed', exitCode: 1, message: 'exited with code 1', outputTail: OUTPUTS.mocha, outputBytes: Buffer.byteLength(OUTPUTS.mocha) }),
      { worktreeDir: WT },
    );
    assert.ok(finding);
    assert.deepEqual([finding.severity, finding.source, finding.checkId, finding.file, finding.line], ['bug', 'check', 'plan-1', 'test/greet.test.js', 5]);
    assert.equal(finding.fingerprint, checkFindingFingerprint(spec));
    assert.equal(
      finding.description,
      [
        'Check failed: check 1: npm test',
        'Written in the ```sh block at line 1 of the Verification part; Forge ran it in the worktree and it exited with code 1 (after 3.2 s).',
        '',
        'Command:',
        '```sh',
        'npm test',
        '```',
        '',
        'Output:',
        '```',
        OUTPUTS.mocha.replace(/\n$/, ''),
        '```',
        '',
        'This finding comes from a check, not from the auditor: it is resolved when the check passes, and the loop cannot complete before.',
      ].join('\n'),
    );
  });

  it('is nothing for a passed check, nor for a cancelled run (it says nothing about the work)', () => {
    assert.equal(checkFinding(spec, result(spec, {}), { worktreeDir: WT }), null);
    assert.equal(checkFinding(spec, result(spec, { status: 'cancelled', exitCode: null, message: 'cancelled; Forge stopped it and everything it started' }), { worktreeDir: WT }), null);
  });

  it('says a timeout, a command that could not start, and an output that printed nothing; names no file when the output names none', () => {
    const timedOut = checkFinding(
      spec,
      result(spec, { status: 'timed-out', exitCode: null, signal: 'SIGTERM', message: 'timed out after 1500 ms; Forge killed it and everything it started', outputTail: 'started\n', outputBytes: 8 }),
      { worktreeDir: WT },
    )!;
    assert.match(timedOut.description, /it timed out after 1500 ms; Forge killed it and everything it started \(after 3\.2 s\)\./);
    assert.deepEqual([timedOut.file, timedOut.line], ['', 0]);
    const notFound = checkFinding(
      spec,
      result(spec, { status: 'not-started', exitCode: 127, message: 'command not found (exit 127): bash: line 1: npm: command not found', outputTail: 'bash: line 1: npm: command not found\n', outputBytes: 37 }),
      { worktreeDir: WT },
    )!;
    assert.match(notFound.description, /it could not run: command not found \(exit 127\): bash: line 1: npm: command not found\./);
    const silent = checkFinding(spec, result(spec, { status: 'failed', exitCode: 2, message: 'exited with code 2' }), { worktreeDir: WT })!;
    assert.match(silent.description, /\n\nIt printed nothing\.\n/);
  });

  it('carries only the end of a long output, says how much it left out, and fences output holding backticks', () => {
    const output = `${'x'.repeat(20_000)}\n\`\`\`\`\nend\n`;
    const finding = checkFinding(spec, result(spec, { status: 'failed', exitCode: 1, message: 'exited with code 1', outputTail: output, outputBytes: 5_000_000 }), {
      worktreeDir: WT,
      maxOutputBytes: 100,
    })!;
    assert.match(finding.description, /Output \(the last 100 of 5000000 bytes\):\n`````\nx{90}\n````\nend\n`````\n/);
  });

  it('names the file of a failed contains/matches assertion, and keeps one fingerprint per scope and assertion', () => {
    const [contains] = parseGoalCheckOptions({ contains: ['README.md:## Usage'] }).checks as [CheckSpec];
    const finding = checkFinding(contains, result(contains, { status: 'failed', exitCode: null, message: 'README.md does not contain "## Usage"' }), { worktreeDir: WT })!;
    assert.deepEqual([finding.file, finding.line], ['README.md', 0]);
    assert.match(finding.description, /^Check failed: check 1: contains: README.md: "## Usage"\nWritten in --contains "README.md:## Usage"; Forge ran it in the worktree and found that README.md does not contain "## Usage"\.\n\nThis finding/);
    const again = parseGoalCheckOptions({ check: ['true'], contains: ['README.md: ## Usage'] }).checks[1]!;
    assert.equal(checkFindingFingerprint(again), checkFindingFingerprint(contains));
    const inSection = parseSectionChecks({ index: 1, body: 'Verify: npm test' }).checks[0]!;
    assert.equal(inSection.key, spec.key);
    assert.notEqual(checkFindingFingerprint(inSection), checkFindingFingerprint(spec));
    assert.equal(checkFindingFingerprint(inSection), `check:section-2:${spec.key}`);
  });
});
