/**
 * A ready worktree (issue 27, items 1–3 and 5), end to end through the real `forge` CLI with
 * real opencode, git, bwrap (the default sandbox), npm with uvu from the registry and pytest from
 * the system packages; only the model is scripted.
 * - npm, reuse: the checkout's node_modules is mounted read-only (a hostile coder cannot change
 *   it), `.env` comes through `.worktreeinclude`, `npm test` passes in place, the loop completes;
 * - npm, install: a lockfile that differs from the checkout's makes the setup run `npm ci` (network
 *   on, Forge's package cache); a hostile setup command cannot write outside the worktree but the
 *   cache; a wrong change the auditor approves fails with uvu's output as the finding;
 * - Python: a failing setup command ends the loop setup_failed (exit 11, worktree kept); fixed,
 *   `forge restart` runs the setup again and the loop completes with pytest in the reused venv.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';
import { MOCK_MODEL, writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { ensureUvuFixture, makeVenv, prepareUvuCheckout, pythonPrereqs, uvuProjectFiles, type NpmFixture } from '../../support/project-fixtures';
import { bashCall, firstCoderActsScript } from '../../support/first-coder-script';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';
import { startScriptedModel, type ScriptedModel } from '../../support/scripted-model';

const log = (r: { code: number | null; stdout: string; stderr: string }) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

describe('a ready worktree: the setup phase (real forge CLI, opencode, git, bwrap, npm, pytest)', function () {
  this.timeout(15 * 60_000);
  let model: ScriptedModel;
  let env: OpencodeTestEnvironment;
  let work: string;
  let fixture: NpmFixture;
  const repos: TestRepository[] = [];
  const runners: CliRunner[] = [];
  let cliPath: string;

  before(async () => {
    bwrapPrereqs();
    pythonPrereqs();
    fixture = ensureUvuFixture();
    cliPath = ensureCliBuilt(REPO_ROOT);
    model = await startScriptedModel();
    env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    work = await mkdtemp(path.join(sandboxTestTempRoot(), 'worktree-setup-'));
  });
  after(async () => {
    for (const r of runners) await r.killAll();
    await model?.close().catch(() => {});
    await env?.cleanup().catch(() => {});
    for (const r of repos) await r.cleanup().catch(() => {});
    if (work) await rm(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  function runnerFor(repo: TestRepository, settings: Record<string, unknown> = {}): CliRunner {
    const runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', path.join(work, 'data'), '--repo', repo.dir], settings: { 'forge.loop.stallTimeoutMs': 300_000, ...settings } });
    runners.push(runner);
    return runner;
  }

  async function npmProject(): Promise<TestRepository> {
    const repo = await createTestRepository(uvuProjectFiles(fixture));
    repos.push(repo);
    prepareUvuCheckout(fixture, repo.dir);
    return repo;
  }

  it('npm, reuse: node_modules read-only from the checkout, .env copied, npm test passes in place; the coder cannot change the user\'s node_modules', async () => {
    const repo = await npmProject();
    const runner = runnerFor(repo);
    model.setHandler(
      firstCoderActsScript([
        bashCall('hack', 'touch node_modules/uvu/HACKED; echo "touch rc=$?"; rm -rf node_modules/uvu; echo "rm rc=$?"; ls node_modules/uvu/package.json'),
        bashCall('work', "printf 'module.exports = (a, b) => a + b;\\n' > add.js && npm test"),
      ]),
    );
    const r = await runner.run(['goal', 'Make add.js add', '--name', 'reuse', '--model', MOCK_MODEL, '--max-iterations', '2', '--check', 'npm test'], { timeoutMs: 8 * 60_000 });
    assert.equal(r.code, 0, log(r));
    assert.match(r.stdout, /setup: done copy 1 ignored file of \.worktreeinclude/, log(r));
    assert.match(r.stdout, /setup: done dependencies: node_modules \(your checkout's, read-only\)/, log(r));
    assert.match(r.stdout, /setup: the worktree is ready \(\d+\.\d s\)/, log(r));
    assert.doesNotMatch(r.stdout, /npm ci/, 'reuse must not install');
    assert.match(r.stdout, /check PASS check 1: npm test/, log(r));
    assert.doesNotMatch(r.stdout, /clean checkout/, `the checks ran in place\n${log(r)}`);
    assert.match(r.stdout, /ended: completed/, log(r));
    // The user's node_modules is as it was: the sandbox had it read-only.
    assert.ok(!existsSync(path.join(repo.dir, 'node_modules', 'uvu', 'HACKED')));
    assert.ok(existsSync(path.join(repo.dir, 'node_modules', 'uvu', 'package.json')));
    const worktree = path.join(work, 'data', 'worktrees', 'reuse');
    assert.equal(readFileSync(path.join(worktree, '.env'), 'utf8'), 'GREETING=hello\n');
    // Nothing of node_modules is in the worktree: only the empty mount point.
    assert.deepEqual(readdirSync(path.join(worktree, 'node_modules')), []);
  });

  it('npm, install: a changed lockfile runs npm ci in the setup sandbox; a hostile setup command reaches only the worktree and the cache; a wrong change fails with uvu\'s output', async () => {
    const repo = await npmProject();
    // The checkout's lockfile differs from the base commit's (a formatting change): install.
    writeFileSync(path.join(repo.dir, 'package-lock.json'), `${fixture.packageLock.trimEnd()}\n\n`);
    const outside = path.join(work, 'outside-target');
    const cache = path.join(work, 'data', 'package-cache');
    const hostile = [
      `(echo pwned > ${repo.dir}/PWNED) 2>/dev/null; (echo pwned > ${outside}) 2>/dev/null; (touch ${repo.dir}/node_modules/PWNED) 2>/dev/null; true`,
      `echo cached > ${cache}/hostile-was-here && echo setup-ran > setup-marker.txt && ls node_modules/uvu/package.json`,
      'echo streamed-first; sleep 1; echo streamed-second',
    ];
    const runner = runnerFor(repo, { 'forge.worktree.setup': hostile });
    model.setHandler(firstCoderActsScript([bashCall('wrong', "printf 'module.exports = (a, b) => a - b;\\n' > add.js")]));
    const r = await runner.run(['goal', 'Make add.js add', '--name', 'install', '--model', MOCK_MODEL, '--max-iterations', '1', '--check', 'npm test', '--follow'], { timeoutMs: 8 * 60_000 });
    assert.notEqual(r.code, 0, log(r));
    assert.match(r.stdout, /setup: done install node_modules \(npm ci; package-lock\.json differs from your checkout's\)/, log(r));
    assert.match(r.stdout, /setup \| added \d+ packages/, `--follow shows the install's output\n${log(r)}`);
    assert.match(r.stdout, /setup: done setup: echo cached/, log(r));
    // --follow streams a command's output while it runs: its lines come before its step's end.
    const streamedAt = r.stdout.indexOf('setup | streamed-first');
    const stepDoneAt = r.stdout.search(/setup: done setup: echo streamed-first/);
    assert.ok(streamedAt >= 0 && stepDoneAt > streamedAt && r.stdout.indexOf('setup | streamed-second') < stepDoneAt, `streamed, not printed at the end\n${log(r)}`);
    assert.doesNotMatch(r.stdout, /ended: completed/, log(r));
    // The hostile setup command wrote nothing outside the worktree but the cache.
    assert.ok(!existsSync(path.join(repo.dir, 'PWNED')));
    assert.ok(!existsSync(outside));
    assert.ok(!existsSync(path.join(repo.dir, 'node_modules', 'PWNED')));
    assert.equal(readFileSync(path.join(cache, 'hostile-was-here'), 'utf8'), 'cached\n');
    assert.ok(readdirSync(path.join(cache, 'npm')).length > 0, 'npm used Forge\'s package cache');
    // The wrong change failed uvu's test; its output is the finding.
    assert.match(r.stdout, /check FAIL check 1: npm test/, log(r));
    const findings = await runner.run(['findings', 'install', '--json']);
    assert.match(findings.stdout, /Expected values to be strictly equal|FAIL .*adds/, log(findings));
  });

  it('python: a failing setup command ends setup_failed (exit 11, worktree kept); fixed, forge restart completes with pytest in the reused venv', async () => {
    const repo = await createTestRepository({
      'requirements.txt': '# pytest comes from the system packages (the venv sees them)\n',
      'add.py': 'def add(a, b):\n    return 0\n',
      'test_add.py': 'from add import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n',
      '.gitignore': '.venv/\n__pycache__/\n.pytest_cache/\n',
      '.forge/worktree.json': `${JSON.stringify({ setup: ['./prepare.sh'] })}\n`,
    });
    repos.push(repo);
    makeVenv(path.join(repo.dir, '.venv'));
    const runner = runnerFor(repo);
    model.setHandler(firstCoderActsScript([bashCall('work', "printf 'def add(a, b):\\n    return a + b\\n' > add.py && .venv/bin/python -m pytest -q -p no:cacheprovider")]));
    const args = ['goal', 'Make add add', '--name', 'python', '--model', MOCK_MODEL, '--max-iterations', '2', '--follow', '--check', '.venv/bin/python -m pytest -q -p no:cacheprovider'];
    const failed = await runner.run(args, { timeoutMs: 8 * 60_000 });
    assert.equal(failed.code, 11, log(failed));
    assert.match(failed.stdout, /setup: FAILED setup: \.\/prepare\.sh/, log(failed));
    assert.match(failed.stdout, /ended: setup_failed \(setup_failed: setup: \.\/prepare\.sh failed: command not found \(exit 127\)/, log(failed));
    assert.doesNotMatch(failed.stdout, /coding: session/, 'no coder started on a failed setup');
    const worktree = path.join(work, 'data', 'worktrees', 'python');
    assert.ok(existsSync(path.join(worktree, 'add.py')), 'the worktree is kept');
    // The fix: the script the setup names, in the worktree.
    writeFileSync(path.join(worktree, 'prepare.sh'), '#!/bin/sh\necho prepared > .prepared\n');
    chmodSync(path.join(worktree, 'prepare.sh'), 0o755);
    const restarted = await runner.run(['restart', 'python'], { timeoutMs: 8 * 60_000 });
    assert.equal(restarted.code, 0, log(restarted));
    assert.match(restarted.stdout, /setup: done dependencies: \.venv \(your checkout's, read-only\)/, log(restarted));
    assert.match(restarted.stdout, /setup: done setup: \.\/prepare\.sh/, log(restarted));
    assert.match(restarted.stdout, /check PASS check 1: \.venv\/bin\/python -m pytest/, log(restarted));
    assert.match(restarted.stdout, /ended: completed/, log(restarted));
  });
});
