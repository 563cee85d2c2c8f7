/**
 * The model a user configured in opencode is the one Forge uses (issue 28 item 2): Forge asks
 * opencode's own resolved configuration (a probe server's config endpoint) instead of matching
 * lines of files, so a one-line `opencode.json` and a project-level `opencode.json` count.
 * Real CLI, opencode and git; only the model is scripted.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { sessionScript } from '../../support/loop-harness';
import { MOCK_MODEL, mockProviderConfig } from '../../support/opencode-test-env';
import { forgeAgentOf, text, toolCall } from '../../support/scripted-model';

describe('forge uses the model of opencode\'s resolved configuration (real CLI, opencode)', function () {
  this.timeout(600_000);
  // No "model" in the (pretty-printed) user configuration the world writes: each test writes its own.
  const w = useCliLoopWorld('forge-configured-model-', { 'README.md': '# configured\n' }, { environment: { extraUserConfig: { model: undefined, small_model: undefined } } });

  it('a one-line user opencode.json naming a model: forge run uses it, not the embedded model', async () => {
    await writeFile(w.env.userConfigPath, JSON.stringify({ model: MOCK_MODEL, small_model: MOCK_MODEL, autoupdate: false, share: 'disabled', provider: mockProviderConfig(w.model.baseURL) }));
    const loop = 'oneline';
    const worktree = join(w.work, 'data', 'worktrees', loop);
    w.model.setHandler(
      sessionScript((role) =>
        role === 'code'
          ? [toolCall('write', { filePath: join(worktree, 'hello.txt'), content: 'hello\n' }), toolCall('forge_loop_handoff', { decisions: 'wrote it', verification: 'none', notesForAuditor: '' })]
          : [toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' })],
      ).handler,
    );
    const plan = join(w.work, 'plan.md');
    await writeFile(plan, `# One line\n\nLoop Name: ${loop}\n\n## Write hello.txt\nWrite hello.txt saying hello.\n\n## Verification\n- exists: hello.txt\n`);
    const r = await w.runner.run(['run', plan, '--no-sandbox'], { timeoutMs: 280_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.doesNotMatch(r.stdout + r.stderr, /embedded scripted model/);
    const status = JSON.parse((await w.runner.run(['status', loop, '--json'])).stdout) as { model: string | null; status: string };
    assert.equal(status.status, 'completed');
    assert.equal(status.model, MOCK_MODEL);
    assert.ok(w.model.agentRequests.some((q) => forgeAgentOf(q) === 'forge-code'), 'the configured (scripted) model coded');
  });

  it('a project-level opencode.json naming the model: forge plan drafts on it and forge group splits on it', async () => {
    // The user's configuration only declares the provider; the repository's own file names the model.
    await writeFile(w.env.userConfigPath, JSON.stringify({ autoupdate: false, share: 'disabled', provider: mockProviderConfig(w.model.baseURL) }));
    await writeFile(join(w.repo.dir, 'opencode.json'), JSON.stringify({ model: MOCK_MODEL }));
    await w.repo.git('add', 'opencode.json');
    await w.repo.git('commit', '-q', '-m', 'opencode model');
    w.model.setHandler(() => text('I cannot do that.'));

    const plan = await w.runner.run(['plan', 'Add a greeting file'], { timeoutMs: 280_000 });
    assert.doesNotMatch(plan.stderr, /needs a real model/, plan.stderr);
    assert.ok(w.model.agentRequests.some((q) => forgeAgentOf(q) === 'forge-architect'), `the architect ran on the configured model\n${plan.stdout}\n${plan.stderr}`);

    const prd = join(w.work, 'prd.md');
    await writeFile(prd, '# Greetings\n\n## Feature hello: Hello\nWrite hello.txt.\n');
    const group = await w.runner.run(['group', prd], { timeoutMs: 280_000 });
    assert.ok(w.model.agentRequests.some((q) => forgeAgentOf(q) === 'forge-splitter'), `the splitter ran on the configured model, not the embedded one\n${group.stdout}\n${group.stderr}`);
  });

  it('an unknown model is refused before anything is created, with a did-you-mean: run, dry run, fallback setting, restart (issue 28 item 4)', async () => {
    await writeFile(w.env.userConfigPath, JSON.stringify({ model: MOCK_MODEL, autoupdate: false, share: 'disabled', provider: mockProviderConfig(w.model.baseURL) }));
    const requestsBefore = w.model.agentRequests.length;
    const plan = join(w.work, 'plan-unknown.md');
    await writeFile(plan, '# Unknown model\n\nLoop Name: unknown-model\n\n## Write hello.txt\nWrite hello.txt.\n\n## Verification\n- exists: hello.txt\n');
    const branches = async () => (await w.repo.git('branch', '--list', 'forge/*')).trim();
    const branchesBefore = await branches();

    const run = await w.runner.run(['run', plan, '--no-sandbox', '--model', 'mock/fake-2']);
    assert.equal(run.code, 2, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stderr, /The coding model \(--model\) "mock\/fake-2" is not a model opencode knows; did you mean "mock\/fake-1"\?/);
    assert.equal(existsSync(join(w.work, 'data', 'worktrees', 'unknown-model')), false, 'no worktree');
    assert.equal(await branches(), branchesBefore, 'no branch');

    const dry = await w.runner.run(['run', plan, '--dry-run', '--auditor-model', 'nosuch/model']);
    assert.equal(dry.code, 2, `${dry.stdout}\n${dry.stderr}`);
    assert.match(dry.stderr, /The audit model \(--auditor-model\) "nosuch\/model" is not a model opencode knows; the providers are .*mock/);

    const fallback = await w.runner.run(['run', plan, '--no-sandbox'], { settings: { 'forge.auditorFallbackModels': ['mock/fake1'] } });
    assert.equal(fallback.code, 2, `${fallback.stdout}\n${fallback.stderr}`);
    assert.match(fallback.stderr, /auditor fallback model \(setting forge.auditorFallbackModels\) "mock\/fake1".*did you mean "mock\/fake-1"/);

    // The first test's loop (completed): the model is checked before anything else of the restart.
    const restart = await w.runner.run(['restart', 'oneline', '--model', 'nonexistent/x']);
    assert.equal(restart.code, 2, `${restart.stdout}\n${restart.stderr}`);
    assert.match(restart.stderr, /"nonexistent\/x" is not a model opencode knows/);

    const status = await w.runner.run(['status', '--json']);
    assert.doesNotMatch(status.stdout, /unknown-model/, 'no loop row');
    assert.equal(w.model.agentRequests.length, requestsBefore, 'no session was prompted');
  });
});
