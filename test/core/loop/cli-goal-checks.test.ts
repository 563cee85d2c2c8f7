/**
 * A goal's contract through the real CLI (issue 13): `forge goal … --check … --contains …`, real
 * opencode, real git, the scripted model. The coder's first answer is wrong and the auditor
 * approves it: the goal does not complete, `forge goal` prints each check run, the next coder
 * prompt carries the failure; after the fix the contract passes and the goal completes.
 * `forge status NAME` (and `--json`) show the check log.
 */
import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { sessionScript } from '../../support/loop-harness';
import { toolCall } from '../../support/scripted-model';

const TEST_JS = 'const assert = require("assert");\nassert.equal(require("./add").add(2, 3), 5, "add(2, 3) must be 5");\nconsole.log("add works");\n';

describe('forge goal with a contract: --check and --contains through the CLI (real CLI, opencode, git)', function () {
  this.timeout(300_000);
  const w = useCliLoopWorld('forge-goal-checks-', { 'README.md': '# adder\n', 'test.js': TEST_JS });

  it('the approved wrong answer is sent back with the failing checks; the fixed one completes; run and status show every check run', async () => {
    const loop = 'adder-goal';
    const file = join(w.work, 'data', 'worktrees', loop, 'add.js');
    const handoffCoder = (what: string) => toolCall('forge_loop_handoff', { decisions: what, verification: 'none', notesForAuditor: '' });
    const script = sessionScript((role, nth) => {
      if (role === 'code') return [toolCall('write', { filePath: file, content: nth === 1 ? 'exports.add = (a, b) => a - b;\n' : 'exports.add = (a, b) => a + b;\n' }), handoffCoder(`attempt ${nth}`)];
      return [toolCall('forge_loop_handoff', { summary: 'looks right', done: true, deviations: '', followUps: '' })];
    });
    w.model.setHandler(script.handler);

    const r = await w.runner.run(['goal', 'make add(a, b) return the sum', '--name', loop, '--check', 'node test.js', '--contains', 'add.js:a + b']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const checkLines = r.stdout.split('\n').filter((l) => l.startsWith(`[${loop}] check `));
    assert.equal(checkLines.length, 4, r.stdout);
    assert.match(checkLines[0]!, /^\[adder-goal\] check FAIL check 1: node test\.js \(exit 1, \d+\.\d s, final gate; iteration 1\)$/);
    assert.match(checkLines[1]!, /^\[adder-goal\] check FAIL check 2: contains: add\.js: "a \+ b" \(add\.js does not contain "a \+ b", \d+\.\d s, final gate; iteration 1\)$/);
    assert.match(checkLines[2]!, /^\[adder-goal\] check PASS check 1: node test\.js \(exit 0, \d+\.\d s, final gate; iteration 2\)$/);
    assert.match(checkLines[3]!, /^\[adder-goal\] check PASS check 2: contains: add\.js/);
    assert.match(r.stdout, /auditing → coding \(checks_failed; iteration 2\)/);
    assert.match(r.stdout, /ended: completed after 2 iterations/);
    // It ends with the exact next commands for a completed loop (issue 29 item 7), and they work.
    const branch = /^\[adder-goal\] branch: (\S+)$/m.exec(r.stdout)![1]!;
    assert.deepEqual(r.stdout.split('\n').filter((l) => l.startsWith(`[${loop}] next: `)), [
      `[${loop}] next: git diff ...${branch}   (review the loop's changes)`,
      `[${loop}] next: forge accept ${loop}   (merge its branch into the base branch)`,
    ]);

    const fixer = script.firstRequests.find((q) => q.role === 'code' && q.nth === 2)!.request;
    assert.ok(fixer.lastUserText.includes('add(2, 3) must be 5'), "the failing check's output reached the coder");
    assert.ok(fixer.lastUserText.includes('Check failed: check 2: contains: add.js'), 'the file assertion too');

    const status = await w.runner.run(['status', loop]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^checks \(2\): check 1: node test\.js; check 2: contains: add\.js/m);
    assert.match(status.stdout, /^check log:$/m);
    assert.equal(status.stdout.split('\n').filter((l) => / check (PASS|FAIL) /.test(l)).length, 4);
    const json = await w.runner.run(['status', loop, '--json']);
    const detail = JSON.parse(json.stdout.trim()) as { checkRuns: Array<{ check: string; status: string; exitCode: number | null; outputTail: string }>; transitions: Array<{ event: string }> };
    assert.deepEqual(detail.checkRuns.map((c) => `${c.check}:${c.status}:${c.exitCode ?? '-'}`), ['goal-1:failed:1', 'goal-2:failed:-', 'goal-1:passed:0', 'goal-2:passed:-']);
    assert.match(detail.checkRuns[0]!.outputTail, /AssertionError/);
    assert.deepEqual(detail.transitions.map((t) => t.event), ['start', 'coder_handoff', 'checks_failed', 'coder_handoff', 'checks_passed']);
  });
});
