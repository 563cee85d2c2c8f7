// One engine per data folder in a real extension host (issue 14 part 2): once this window starts
// a loop it is the data folder's engine; a `forge run` (the built dist/cli.mjs, a separate
// process) on the same data folder hands its loop to the window, which supervises it (the lease
// is the window's) while the CLI prints it and exits with its code. Real opencode, the window's
// scripted model answering as the embedded model does, real git and database.
import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { settingDescriptors } from '../../../src/core/config/settings';
import { embeddedAgentStep } from '../../../src/core/opencode/embedded-model';
import { forgeApi, forgeTestEnvironment, MOCK_MODEL, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo } from './support/harness';

/** One section whose check waits for a gate file in the worktree: the loop runs until the test opens it. */
function gatedPlan(name: string): string {
  return [`# ${name}`, `Loop Name: ${name}`, '', `## Write ${name}.txt`, `\`\`\`txt file=${name}.txt`, name, '```', `Run: \`touch running-${name} && while [ ! -f gate-${name} ]; do sleep 0.2; done && echo open\``, ''].join('\n');
}

describe('one engine per data folder: a forge run hands its loop to this window', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  let cli: ChildProcess | undefined;
  let cliExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let work: string | undefined;

  after(async () => {
    (await forgeTestEnvironment()).model.setHandler(undefined);
    try {
      if (cli?.pid && !cliExit) process.kill(-cli.pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('the window starts a loop and listens; forge run hands over: the window supervises the CLI\'s loop, both complete, the CLI exits 0', async () => {
    const env = await forgeTestEnvironment();
    env.model.setHandler((request) => embeddedAgentStep(request));
    const api = await forgeApi();
    const engine = await api.startEngine();
    const repo = harnessInfo().workspaceFolder;
    work = await mkdtemp(join(tmpdir(), 'forge-handover-'));
    const worktree = (name: string) => join(env.dataDir, 'worktrees', name);
    const running = (name: string) => existsSync(join(worktree(name), `running-${name}`));
    const openGate = (name: string) => writeFile(join(worktree(name), `gate-${name}`), '');

    const mine = await engine.runtime.start({ kind: 'plan', repoPath: repo, planText: gatedPlan('window-loop'), planSource: 'window-loop.md', model: MOCK_MODEL, auditorModel: MOCK_MODEL, sandbox: false });
    await waitFor('the window\'s loop at its gated check', () => running('window-loop'), 300_000, 200);
    const info = await waitFor('this window is the data folder\'s engine', () => {
      try {
        const i = JSON.parse(readFileSync(join(env.dataDir, 'engine', 'engine.json'), 'utf8')) as { pid: number; kind: string; supervisorId: string };
        return i.pid === process.pid ? i : undefined;
      } catch {
        return undefined;
      }
    }, 60_000, 200);
    assert.equal(info.kind, 'vscode');
    assert.equal(info.supervisorId, engine.supervisorId);

    // The CLI runs with this window's settings (a loop handed over runs with the engine's).
    const config = vscode.workspace.getConfiguration();
    const settings = Object.fromEntries(settingDescriptors.map((d) => [d.key, config.get(d.key)]).filter(([, v]) => v !== undefined));
    const planPath = join(work, 'cli-loop.md');
    await writeFile(planPath, gatedPlan('cli-loop'));
    let out = '';
    let err = '';
    cli = spawn(process.execPath, [join(harnessInfo().extensionPath, 'dist', 'cli.mjs'), 'run', planPath, '--repo', repo, '--model', MOCK_MODEL, '--auditor-model', MOCK_MODEL, '--no-sandbox', '--json'], {
      env: { ...process.env, ...env.opencode.env, FORGE_DATA_DIR: env.dataDir, FORGE_SETTINGS: JSON.stringify(settings) },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cli.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
    cli.stderr!.on('data', (c: Buffer) => (err += c.toString('utf8')));
    const exited = new Promise<void>((resolve) => cli!.once('close', (code, signal) => resolve(void (cliExit = { code, signal }))));
    const describeCli = () => `forge run (exit ${JSON.stringify(cliExit)})\n--- stdout ---\n${out}\n--- stderr ---\n${err}`;

    await waitFor('the CLI\'s loop at its gated check', () => (cliExit ? 'exited' : running('cli-loop')), 300_000, 200);
    assert.equal(cliExit, undefined, describeCli());
    assert.match(err, new RegExp(`handed loop "cli-loop" to the Forge engine in process ${process.pid} \\(vscode\\)`), describeCli());
    const ref = { projectId: mine.projectId, name: 'cli-loop' };
    assert.equal(engine.runtime.isSupervising(ref), true, 'the window supervises the CLI\'s loop');
    assert.equal(engine.runtime.get(ref)!.supervisorId, engine.supervisorId, 'the lease is the window\'s');

    await openGate('cli-loop');
    await exited;
    assert.equal(cliExit!.code, 0, describeCli());
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as { type: string; loop: string; status?: string });
    assert.equal(lines[0]!.type, 'loop.started', describeCli());
    assert.ok(lines.every((l) => l.loop === 'cli-loop'), describeCli());
    assert.equal(lines.at(-1)!.type, 'loop.ended');
    assert.equal(lines.at(-1)!.status, 'completed', describeCli());

    await openGate('window-loop');
    const end = await engine.runtime.waitForEnd(mine);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed');
  });
});
