/**
 * `forge review` end to end (issue 29 items 2–3; built `dist/cli.mjs`, real opencode, real git,
 * the database file, scripted model): a completed loop gets a comment of the user's review; `--send`
 * runs another coding pass whose prompt carries the comment verbatim; a hostile coder and auditor
 * trying to delete it through the tools are refused; the coder's answer (review_reply) leaves the
 * loop awaiting review (exit 12) with the comment open; `--resolve` runs the final gate and
 * completes it; `forge accept` fast-forwards the base to the fixed work.
 */
import { strict as assert } from 'node:assert';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { sessionScript } from '../../support/loop-harness';
import { toolCall } from '../../support/scripted-model';

const COMMENT = 'Greet the "world" too — "hello" alone is not enough; keep it on line 1.';

describe('forge review: comments on a loop are findings only the user closes, sent back for another pass (real CLI, opencode, git)', function () {
  this.timeout(600_000);
  const w = useCliLoopWorld('forge-review-', { 'README.md': '# review\n' });

  it('comment → send → the coder answers (awaiting_review, exit 12) → resolve completes → accept merges; agents cannot delete the comment', async () => {
    const worktree = join(w.work, 'data', 'worktrees', 'rv');
    w.model.setHandler(
      sessionScript((role) =>
        role === 'code'
          ? [toolCall('write', { filePath: join(worktree, 'app.txt'), content: 'hello\n' }), toolCall('forge_loop_handoff', { decisions: 'Wrote app.txt.', verification: 'none', notesForAuditor: '' })]
          : [toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' })],
      ).handler,
    );
    const run = await w.runner.run(['goal', 'write app.txt', '--name', 'rv', '--no-sandbox']);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);

    const none = await w.runner.run(['review', 'rv', '--send']);
    assert.equal(none.code, 2, 'nothing to send yet');
    assert.match(none.stderr, /no open comment of your review/);

    const added = await w.runner.run(['review', 'rv', '--comment', 'app.txt:1', COMMENT]);
    assert.equal(added.code, 0, `${added.stdout}\n${added.stderr}`);
    const id = Number(/Comment #(\d+) \(bug\) on app\.txt:1 added/.exec(added.stdout)?.[1]);
    assert.ok(id > 0, added.stdout);
    const outside = await w.runner.run(['review', 'rv', '--comment', '../escape.txt:2', 'x']);
    assert.equal(outside.code, 2);
    assert.match(outside.stderr, /is not a file of the loop's worktree/);
    const findings = await w.runner.run(['findings', 'rv']);
    assert.match(findings.stdout, new RegExp(`^#${id} open {6}bug {5}app\\.txt:1 \\(your review\\)$`, 'm'));

    const script = sessionScript((role, nth) => {
      if (role === 'code') {
        return [
          toolCall('forge_review_delete', { id }),
          toolCall('write', { filePath: join(worktree, 'app.txt'), content: 'hello world\n' }),
          toolCall('forge_review_reply', { id, reply: 'app.txt now greets the world.' }),
          toolCall('forge_loop_handoff', { decisions: 'Answered the review.', verification: 'read app.txt', notesForAuditor: '' }),
        ];
      }
      // The first audit of the pass tries to close the user's comment; the final gate's audit is clean.
      return nth === 1
        ? [toolCall('forge_review_delete', { id }), toolCall('forge_loop_handoff', { summary: 'fixed', done: true, deviations: '', followUps: '' })]
        : [toolCall('forge_loop_handoff', { summary: 'still fine', done: true, deviations: '', followUps: '' })];
    });
    w.model.setHandler(script.handler);
    const sent = await w.runner.run(['review', 'rv', '--send']);
    assert.equal(sent.code, 12, `awaiting review\n${sent.stdout}\n${sent.stderr}`);
    assert.match(sent.stdout, /the coder answered your review/);

    const coderPrompt = script.firstRequests.find((r) => r.role === 'code')!.request.lastUserText;
    assert.ok(coderPrompt.includes(COMMENT), `the comment reaches the coder verbatim:\n${coderPrompt}`);
    assert.match(coderPrompt, new RegExp(`### User comment #${id} — BUG — app\\.txt:1`));
    const results = w.model.requests.flatMap((r) => r.toolResults);
    // The coder has no delete tool at all (its role's permissions); the auditor's is refused for a user's comment.
    assert.ok(results.some((t) => t.name === 'invalid' && /unavailable tool 'forge_review_delete'/.test(t.content)), "the coder's attempt found no such tool");
    const deletes = results.filter((t) => t.name === 'forge_review_delete');
    assert.equal(deletes.length, 1, 'the auditor tried');
    assert.match(deletes[0]!.content, /is the user's review comment: no agent can resolve or delete it/);
    const listed = await w.runner.run(['review', 'rv', '--json']);
    const [row] = JSON.parse(listed.stdout.trim()) as Array<{ id: number; status: string; reply: string; text: string }>;
    assert.deepEqual([row!.id, row!.status, row!.reply, row!.text], [id, 'open', 'app.txt now greets the world.', COMMENT]);
    const status = JSON.parse((await w.runner.run(['status', 'rv', '--json'])).stdout.trim()) as { status: string };
    assert.equal(status.status, 'awaiting_review');
    const early = await w.runner.run(['accept', 'rv']);
    assert.notEqual(early.code, 0, 'a loop awaiting review is not accepted');

    const resolved = await w.runner.run(['review', 'rv', '--resolve', String(id)]);
    assert.equal(resolved.code, 0, `${resolved.stdout}\n${resolved.stderr}`);
    assert.match(resolved.stdout, /runs its final gate and completes/);
    assert.equal(script.counts.auditor, 2, 'the final gate audited once more');
    assert.equal((JSON.parse((await w.runner.run(['status', 'rv', '--json'])).stdout.trim()) as { status: string }).status, 'completed');

    const accepted = await w.runner.run(['accept', 'rv']);
    assert.equal(accepted.code, 0, `${accepted.stdout}\n${accepted.stderr}`);
    assert.match(accepted.stdout, /^Fast-forwarded main to forge\/rv/m);
    assert.equal(await readFile(join(w.repo.dir, 'app.txt'), 'utf8'), 'hello world\n');
  });
});
