// *Forge: Accept Loop* (issue 29 item 4) in a real VS Code host: a completed loop is refused,
// with its reason as an error and nothing changed, while the workspace's checkout of main is
// dirty; then it fast-forwards main (the loop's file appears in the checkout), is recorded, and
// removes the worktree and branch when asked.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { calledTools, forgeApi, forgeTestEnvironment, MOCK_MODEL, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo, requestScreenshot } from './support/harness';
import { forgeAgentOf, text, toolCall } from '../../support/scripted-model';
import { worktreeOf } from './support/greeting-loop';

const LOOP = 'accept-me';
const PLAN = `# Accept me\n\nLoop Name: ${LOOP}\n\n## Write accepted.txt\nCreate \`accepted.txt\` saying accepted.\n`;

describe('Accept Loop (issue 29): refused on a dirty checkout, then fast-forwards main', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  const repo = () => harnessInfo().workspaceFolder;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo(), encoding: 'utf8' }).trim();
  let ref: { projectId: string; name: string };
  let baseTip: string;

  before(async () => {
    const env = await forgeTestEnvironment();
    env.model.setHandler(async (request) => {
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (forgeAgentOf(request) === 'forge-code') {
        if (!called.includes('write')) return toolCall('write', { filePath: join(worktreeOf(request), 'accepted.txt'), content: 'accepted\n' });
        return toolCall('forge_loop_handoff', { decisions: 'Wrote accepted.txt.', verification: 'none', notesForAuditor: '' });
      }
      return toolCall('forge_loop_handoff', { summary: 'fine', done: true });
    });
    baseTip = git('rev-parse', 'refs/heads/main');
  });

  after(() => {
    // Give the run's other tests main as it was.
    if (baseTip && git('rev-parse', 'refs/heads/main') !== baseTip) git('reset', '-q', '--hard', baseTip);
  });

  it('runs a loop to completion', async () => {
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', { planText: PLAN, mode: 'loop', model: MOCK_MODEL, auditorModel: MOCK_MODEL, sandbox: false, maxIterations: 4 });
    assert.equal(result.status, 'started', JSON.stringify(result));
    ref = result.loop!;
    const engine = (await forgeApi()).engine()!;
    await waitFor('the loop to complete', () => engine.repos.loops.get(ref.projectId, ref.name)?.status === 'completed', 300_000, 300);
  });

  it('refuses while the checkout of main has uncommitted changes: the reason as an error, nothing changed', async () => {
    const readme = join(repo(), 'README.md');
    const before = readFileSync(readme, 'utf8');
    writeFileSync(readme, `${before}my edit\n`);
    try {
      const r = await vscode.commands.executeCommand<{ status: string; reason?: string; message?: string }>('forge.acceptLoop', ref, { strategy: 'merge-commit', remove: false });
      assert.equal(r.status, 'refused', JSON.stringify(r));
      assert.equal(r.reason, 'not-accepted');
      assert.match(r.message ?? '', /has uncommitted changes.*Commit or stash your changes/);
      assert.equal(git('rev-parse', 'refs/heads/main'), baseTip);
      assert.equal(existsSync(join(repo(), 'accepted.txt')), false);
      assert.equal(readFileSync(readme, 'utf8'), `${before}my edit\n`);
      const engine = (await forgeApi()).engine()!;
      assert.equal(engine.repos.accepts.listByLoop(ref.projectId, ref.name).length, 0);
    } finally {
      writeFileSync(readme, before);
    }
  });

  it('fast-forwards main, records the accept and removes the worktree and branch when asked', async () => {
    const engine = (await forgeApi()).engine()!;
    const row = engine.repos.loops.get(ref.projectId, ref.name)!;
    const tip = git('rev-parse', `refs/heads/${row.branch}`);
    const r = await vscode.commands.executeCommand<{ status: string; detail?: { how: string; commit: string; removed: boolean } }>('forge.acceptLoop', ref, { strategy: 'merge-commit', remove: true });
    assert.equal(r.status, 'done', JSON.stringify(r));
    assert.deepEqual(r.detail, { kind: 'accepted', how: 'fast-forward', commit: tip, removed: true });
    assert.equal(git('rev-parse', 'refs/heads/main'), tip);
    assert.equal(readFileSync(join(repo(), 'accepted.txt'), 'utf8'), 'accepted\n');
    assert.deepEqual(engine.repos.accepts.listByLoop(ref.projectId, ref.name).map((a) => [a.how, a.intoBranch, a.commit]), [['fast-forward', 'main', tip]]);
    assert.equal(existsSync(row.worktreeDir!), false, 'worktree removed');
    assert.equal(git('branch', '--list', row.branch!), '', 'branch removed');
    if (harnessInfo().host === 'code-server') await requestScreenshot('accept-loop-done');
  });
});
