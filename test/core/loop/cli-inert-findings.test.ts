/**
 * A hostile auditor (scripted model, real opencode, real CLI, git and database) records findings
 * whose text carries escape sequences a terminal would act on: clear screen, window title, a
 * hyperlink, NUL, BEL, an 8-bit CSI and a bidi override. Every byte `forge run` (with `--follow`'s
 * transcript), `forge findings` and `forge status` print is inert, `--json` carries the original text intact, and a file name
 * with such characters gets a clear tool error back instead of being stored.
 */
import { strict as assert } from 'node:assert';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { sessionScript } from '../../support/loop-harness';
import { toolCall } from '../../support/scripted-model';

const DESCRIPTION = 'Clears the screen \u001b[2J\u001b[H, sets the title \u001b]0;pwned\u0007, NUL \u0000 here, 8-bit CSI \u009b31m, RLO \u202eexe.md';
const SCENARIO = 'ok\rFAKE: all checks passed \u001b]8;;https://evil.example\u001b\\click\u001b]8;;\u001b\\';
const HOSTILE_FILE = 'README.md\u0000\u001b[2J\u001b]0;title\u0007';

/** Characters a terminal acts on (TAB and LF are text). */
const ACTIVE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

function assertInert(what: string, output: string): void {
  const bytes = Buffer.from(output, 'utf8');
  for (const b of [0x00, 0x07, 0x1b, 0x0d]) assert.equal(bytes.indexOf(b), -1, `${what} holds byte 0x${b.toString(16)}:\n${JSON.stringify(output)}`);
  assert.doesNotMatch(output, ACTIVE, `${what} holds an active character:\n${JSON.stringify(output)}`);
}

describe('model text is inert in the CLI: hostile findings through the real CLI, opencode and git', function () {
  this.timeout(300_000);
  const w = useCliLoopWorld('forge-inert-', { 'README.md': '# inert\n' });

  it('forge run, findings and status print escapes, never the sequences; --json keeps the original; a hostile file name is refused to the model', async () => {
    const loop = 'inert';
    const worktree = join(w.work, 'data', 'worktrees', loop);
    const script = sessionScript((role, nth) => {
      if (role === 'code') {
        return [
          toolCall('write', { filePath: join(worktree, 'hello.txt'), content: 'hello\n' }),
          toolCall('forge_loop_handoff', { decisions: 'wrote it', verification: 'none', notesForAuditor: '' }),
        ];
      }
      const handoff = toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' });
      if (nth > 1) return [handoff];
      return [
        toolCall('forge_review_write', { file: HOSTILE_FILE, line: 1, severity: 'warning', description: 'hostile file name' }),
        toolCall('forge_review_write', { file: 'README.md', line: 1, severity: 'warning', description: DESCRIPTION, scenario: SCENARIO }),
        handoff,
      ];
    });
    w.model.setHandler(script.handler);
    const plan = join(w.work, 'plan.md');
    await writeFile(plan, `# Inert\n\nLoop Name: ${loop}\n\n## Write hello.txt\nWrite hello.txt saying hello.\n\n## Verification\n- exists: hello.txt\n`);
    // --follow: the agent's transcript (tool calls with their arguments and results) is printed too.
    const run = await w.runner.run(['run', plan, '--no-sandbox', '--max-iterations', '6', '--follow'], { timeoutMs: 280_000 });
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assertInert('forge run (stdout)', run.stdout);
    assertInert('forge run (stderr)', run.stderr);
    assert.ok(run.stdout.includes('\\u001b[2J\\u001b[H, sets the title \\u001b]0;pwned\\u0007, NUL \\u0000 here'), run.stdout);
    assert.ok(run.stdout.split('\n').some((l) => /tool .*review_write/.test(l) && l.includes('\\u001b[2J')), run.stdout);

    // The model was told why its file name was refused, and the refusal itself is inert.
    const refusals = w.model.requests.flatMap((r) => r.toolResults).filter((t) => /contains control, escape or bidi characters/.test(t.content));
    assert.equal(refusals.length, 1, 'one refusal reached the model');
    assert.ok(refusals[0]!.content.includes('README.md\\u0000\\u001b[2J'), refusals[0]!.content);

    const findings = await w.runner.run(['findings', loop]);
    assert.equal(findings.code, 0, findings.stderr);
    assertInert('forge findings', findings.stdout + findings.stderr);
    assert.match(findings.stdout, /^#\d+ open {6}warning README\.md:1$/m);
    assert.ok(findings.stdout.includes('RLO \\u202eexe.md'), findings.stdout);
    assert.ok(findings.stdout.includes('scenario: ok\\u000dFAKE: all checks passed \\u001b]8;;https://evil.example\\u001b\\click'), findings.stdout);

    const json = await w.runner.run(['findings', loop, '--json']);
    assertInert('forge findings --json', json.stdout);
    const rows = JSON.parse(json.stdout) as Array<{ id: number; status: string; file: string; description: string; scenario: string }>;
    assert.deepEqual(rows.map((r) => [r.file, r.description, r.scenario]), [['README.md', DESCRIPTION, SCENARIO]]);

    for (const args of [['status'], ['status', loop], ['status', loop, '--json']]) {
      const status = await w.runner.run(args);
      assert.equal(status.code, 0, status.stderr);
      assertInert(`forge ${args.join(' ')}`, status.stdout + status.stderr);
    }

    // Only the user's word resolves such a finding: `forge findings NAME --accept ID` dismisses it, for good.
    const accepted = await w.runner.run(['findings', loop, '--accept', String(rows[0]!.id)]);
    assert.equal(accepted.code, 0, accepted.stderr);
    assert.match(accepted.stdout, new RegExp(`^Finding #${rows[0]!.id} of loop "${loop}": accepted \\(dismissed\\)`));
    const after = JSON.parse((await w.runner.run(['findings', loop, '--json'])).stdout) as Array<{ id: number; status: string }>;
    assert.equal(after.find((r) => r.id === rows[0]!.id)?.status, 'dismissed');
  });
});
