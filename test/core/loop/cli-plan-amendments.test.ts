/**
 * A plan amended by the auditor mid-loop (plan_adjust) through the real CLI, opencode, git and
 * the scripted model: `forge status NAME` shows the amendment (when, during which audit, the
 * rationale, the section's diff) and `--json` carries it.
 */
import { strict as assert } from 'node:assert';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { sessionScript } from '../../support/loop-harness';
import { toolCall } from '../../support/scripted-model';

const RATIONALE = 'bye.txt must end with a newline for the comparison to work.';

describe('forge status shows the auditor\'s plan amendments (real CLI, opencode, git)', function () {
  this.timeout(300_000);
  const w = useCliLoopWorld('forge-amend-', { 'README.md': '# amend\n' });

  it('the amendment is stored once and shown with its rationale, audit and diff, as text and JSON', async () => {
    const loop = 'amend';
    const worktree = join(w.work, 'data', 'worktrees', loop);
    const script = sessionScript((role, nth) => {
      if (role === 'code') {
        return [
          toolCall('write', { filePath: join(worktree, `pass-${nth}.txt`), content: `pass ${nth}\n` }),
          toolCall('forge_loop_handoff', { decisions: 'wrote it', verification: 'none', notesForAuditor: '' }),
        ];
      }
      const handoff = toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' });
      if (nth === 1) {
        return [toolCall('forge_plan_adjust', { rationale: RATIONALE, sections: [{ title: 'Write bye.txt', body: 'Write bye.txt saying bye.\nEnd it with a newline.' }] }), handoff];
      }
      return [handoff];
    });
    w.model.setHandler(script.handler);
    const plan = join(w.work, 'plan.md');
    await writeFile(plan, `# Amend\n\nLoop Name: ${loop}\n\n## Write hello.txt\nWrite hello.txt saying hello.\n\n## Write bye.txt\nWrite bye.txt saying bye.\n\n## Verification\n- exists: README.md\n`);
    const r = await w.runner.run(['run', plan, '--no-sandbox', '--max-iterations', '8'], { timeoutMs: 280_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);

    const status = await w.runner.run(['status', loop]);
    assert.equal(status.code, 0, status.stderr);
    const lines = status.stdout.split('\n');
    const at = lines.indexOf('plan amendments (1):');
    assert.ok(at > 0, status.stdout);
    assert.match(lines[at + 1]!, /^ {2}\d{4}-\d\d-\d\dT[\d:.]+Z during the audit of section 1 \(iteration \d+\): bye\.txt must end with a newline/);
    assert.deepEqual(lines.slice(at + 2, at + 6), [
      '    section 2 "Write bye.txt" revised (+1 −0 lines)',
      '        ## Write bye.txt',
      '        Write bye.txt saying bye.',
      '      + End it with a newline.',
    ]);

    const json = await w.runner.run(['status', loop, '--json']);
    const detail = JSON.parse(json.stdout) as { amendments: { rationale: string; auditedSectionIndex: number; changes: { kind: string; sectionIndex: number; diff: { op: string; text: string }[] }[] }[] };
    assert.equal(detail.amendments.length, 1);
    assert.equal(detail.amendments[0]!.rationale, RATIONALE);
    assert.equal(detail.amendments[0]!.auditedSectionIndex, 0);
    assert.deepEqual(detail.amendments[0]!.changes.map((c) => [c.kind, c.sectionIndex, c.diff.filter((d) => d.op === '+').map((d) => d.text)]), [['revised', 1, ['End it with a newline.']]]);
  });

  it('a section the auditor adds during the last section\'s audit is coded and audited before the loop completes (issue 28)', async () => {
    const loop = 'added';
    const worktree = join(w.work, 'data', 'worktrees', loop);
    const script = sessionScript((role, nth) => {
      if (role === 'code') {
        return [
          toolCall('write', { filePath: join(worktree, `pass-${nth}.txt`), content: `pass ${nth}\n` }),
          toolCall('forge_loop_handoff', { decisions: 'wrote it', verification: 'none', notesForAuditor: '' }),
        ];
      }
      const handoff = toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' });
      if (nth === 1) return [toolCall('forge_plan_adjust', { rationale: 'The docs need a section of their own.', sections: [{ title: 'Docs section', body: 'Write docs.txt.' }] }), handoff];
      return [handoff];
    });
    w.model.setHandler(script.handler);
    const plan = join(w.work, 'plan-added.md');
    await writeFile(plan, `# Added\n\nLoop Name: ${loop}\n\n## Write hello.txt\nWrite hello.txt saying hello.\n\n## Verification\n- exists: README.md\n`);
    const r = await w.runner.run(['run', plan, '--no-sandbox', '--max-iterations', '8', '--json'], { timeoutMs: 280_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);

    // Issue 28 item 8 on the same loop: the JSON shapes and the texts of a completed loop.
    const usage = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { type: string; sessionId?: string; session?: { inputTokens: number }; total?: { cost: number } }).filter((e) => e.type === 'loop.usage');
    assert.ok(usage.length >= 4, r.stdout);
    for (const e of usage) assert.ok(e.sessionId && e.session!.inputTokens > 0 && e.total!.cost > 0, JSON.stringify(e));
    const findings = await w.runner.run(['findings', loop, '--json']);
    assert.equal(findings.stdout.trim(), '[]');
    const text = (await w.runner.run(['status', loop])).stdout.split('\n');
    assert.equal(text[0], `${loop}: completed, iteration 2`);
    assert.ok(text.includes('models: coding mock/fake-1, audit same as coding'), text.join('\n'));
    const row = (await w.runner.run(['status'])).stdout.split('\n').find((l) => l.startsWith(`${loop} `))!;
    assert.match(row, /^added {20}completed done {12}it 2 section 2\/2/);
    assert.doesNotMatch(row, /final_auditing|— completed/);

    const json = await w.runner.run(['status', loop, '--json']);
    const detail = JSON.parse(json.stdout) as { status: string; sections: { done: number; total: number }; attempts: { kind: string; section: number | null }[] };
    assert.equal(detail.status, 'completed');
    assert.deepEqual(detail.sections, { done: 2, total: 2 }, json.stdout);
    // The added section had a coding pass and an audit of its own.
    assert.ok(detail.attempts.some((a) => a.kind === 'coding' && a.section === 1), json.stdout);
    assert.ok(detail.attempts.some((a) => a.kind === 'audit' && a.section === 1), json.stdout);
  });
});
