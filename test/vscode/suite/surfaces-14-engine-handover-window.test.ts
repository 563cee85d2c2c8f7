// One engine per data folder, the other way round (issue 14 part 2): a `forge run` (the built
// dist/cli.mjs, a separate process) is the data folder's engine; Execute Plan in this window
// hands its loop to that process, which supervises it (the lease is the CLI's), and the window
// shows it as a loop another process supervises (Loop Explorer, notification). Cancel Loop in the
// window ends such a loop too, and Restart Loop hands the restart to the engine as well. Real opencode, the scripted model answering as the embedded model
// does, real git and database. Second test: a window that found a CLI being the engine becomes it at
// its next loop once the CLI has gone, and compares a later run's settings with its own as they are now.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

interface StartedResult {
  status: string;
  loop?: { projectId: string; name: string };
  supervisorPid?: number;
  message?: string;
}

/** This window's forge.* settings as they are now: what a `forge run` needs to match them (FORGE_SETTINGS). */
function windowSettings(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration();
  return Object.fromEntries(settingDescriptors.map((d) => [d.key, config.get(d.key)]).filter(([, v]) => v !== undefined));
}

/** A `forge run` of the built CLI (its own process group), its output as it comes and its exit once it exited. */
interface CliRun {
  readonly pid: number;
  readonly exited: Promise<void>;
  out(): string;
  err(): string;
  /** Undefined while it runs. */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  describe(): string;
}

/** `forge run PLAN --json` on the mock model, unconfined, with these settings on the test's data folder. */
function startCliRun(planPath: string, repo: string, env: Record<string, string>, settings: Record<string, unknown>): CliRun {
  const child = spawn(process.execPath, [join(harnessInfo().extensionPath, 'dist', 'cli.mjs'), 'run', planPath, '--repo', repo, '--model', MOCK_MODEL, '--auditor-model', MOCK_MODEL, '--no-sandbox', '--json'], {
    env: { ...process.env, ...env, FORGE_SETTINGS: JSON.stringify(settings) },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('close', (code, signal) => resolve(void (exit = { code, signal }))));
  return {
    pid: child.pid!,
    exited,
    out: () => out,
    err: () => err,
    exit: () => exit,
    describe: () => `forge run (exit ${JSON.stringify(exit)})\n--- stdout ---\n${out}\n--- stderr ---\n${err}`,
  };
}

describe('one engine per data folder: this window hands its loop to a forge run that is the engine', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  const runs: CliRun[] = [];
  let work: string | undefined;

  after(async () => {
    (await forgeTestEnvironment()).model.setHandler(undefined);
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    for (const run of runs) {
      try {
        if (!run.exit()) process.kill(-run.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
    if (work) await rm(work, { recursive: true, force: true });
  });

  /**
   * The embedded model, and a fresh engine in this window on the test's data folder: a window that
   * started loops earlier in this run is the data folder's engine and stops being it here, and the
   * new one has not tried to listen yet.
   */
  async function freshWindowEngine() {
    const env = await forgeTestEnvironment();
    env.model.setHandler((request) => embeddedAgentStep(request));
    const api = await forgeApi();
    await api.setTestEnvironment({ ...env.opencode.env, FORGE_DATA_DIR: env.dataDir });
    // Adding a worktree folder to this single-folder window would restart the extension host (and this test).
    await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
    const engine = await api.startEngine();
    return { env, api, engine, repo: harnessInfo().workspaceFolder };
  }

  it('Execute Plan while a forge run is the engine: the CLI supervises the window\'s loop, the window shows it; Cancel Loop ends another and Restart Loop hands it over again; the CLI exits 0', async () => {
    const { env, api, engine, repo } = await freshWindowEngine();
    work = await mkdtemp(join(tmpdir(), 'forge-handover-window-'));
    const worktree = (name: string) => join(env.dataDir, 'worktrees', name);
    const running = (name: string) => existsSync(join(worktree(name), `running-${name}`));
    const openGate = (name: string) => writeFile(join(worktree(name), `gate-${name}`), '');

    // The CLI runs with this window's settings: a loop is handed over only between equal settings.
    const planPath = join(work, 'cli-own.md');
    await writeFile(planPath, gatedPlan('cli-own'));
    const cli = startCliRun(planPath, repo, { ...env.opencode.env, FORGE_DATA_DIR: env.dataDir }, windowSettings());
    runs.push(cli);

    await waitFor('the CLI\'s own loop at its gated check', () => (cli.exit() ? 'exited' : running('cli-own')), 300_000, 200);
    assert.equal(cli.exit(), undefined, cli.describe());
    const info = await waitFor('the CLI is the data folder\'s engine', () => {
      try {
        const i = JSON.parse(readFileSync(join(env.dataDir, 'engine', 'engine.json'), 'utf8')) as { pid: number; kind: string };
        return i.pid === cli.pid ? i : undefined;
      } catch {
        return undefined;
      }
    }, 60_000, 200);
    assert.equal(info.kind, 'cli');

    const execute = (name: string) =>
      vscode.commands.executeCommand<StartedResult>('forge.executePlan', { planText: gatedPlan(name), mode: 'loop', model: MOCK_MODEL, auditorModel: MOCK_MODEL, sandbox: false, maxIterations: 5 });

    // The window's loop goes to the CLI.
    const result = await execute('handed-loop');
    assert.equal(result.status, 'started', JSON.stringify(result));
    assert.equal(result.supervisorPid, cli.pid, `the CLI supervises the loop: ${JSON.stringify(result)}\n${cli.describe()}`);
    const ref = result.loop!;
    assert.equal(ref.name, 'handed-loop');
    await waitFor('the handed loop at its gated check', () => (cli.exit() ? 'exited' : running('handed-loop')), 300_000, 200);
    assert.equal(cli.exit(), undefined, cli.describe());
    assert.match(cli.err(), new RegExp(`supervising loop "handed-loop" handed over by process ${process.pid}`), cli.describe());
    assert.equal(engine.runtime.isSupervising(ref), false, 'the window does not supervise the loop');
    assert.equal(engine.runtime.isSupervising({ projectId: ref.projectId, name: 'cli-own' }), false);
    // The lease is the CLI's (the window reads the database as any other process's loop).
    await waitFor('the loop\'s lease held by the CLI', () => engine.runtime.get(ref)?.supervisorId?.startsWith(`${cli.pid}:cli-`), 60_000, 200);
    // The window said who supervises it.
    assert.ok(
      api.notifications().some((n) => n.message.includes(`"handed-loop" started in the Forge engine of process ${cli.pid} (cli)`)),
      api.notifications().map((n) => n.message).join(' | '),
    );
    // The Loop Explorer shows it as a loop another process runs.
    const node = await waitFor('the handed loop in the Loop Explorer, run by another process', async () => {
      await vscode.commands.executeCommand('forge.refreshLoops');
      const found = api
        .treeSnapshot()
        .flatMap(function all(n): typeof n[] {
          return [n, ...n.children.flatMap(all)];
        })
        .find((n) => n.id === `loop:${ref.projectId}/${ref.name}`);
      return found?.tooltip?.includes('running in another window or process') ? found : undefined;
    }, 60_000, 500);
    assert.ok(!node.tooltip!.includes('running in this window'));
    // So does the dashboard's loop detail.
    await vscode.commands.executeCommand('forge.openDashboard', ref);
    await waitFor('the dashboard showing the handed loop as supervised elsewhere', () => {
      const state = api.dashboard().state;
      return state?.detail?.key.name === ref.name && state.detail.supervision === 'elsewhere';
    }, 60_000, 200);

    // Cancel Loop in the window ends a loop the CLI supervises (the supervisor honours the request).
    const doomed = await execute('handed-cancel');
    assert.equal(doomed.supervisorPid, cli.pid, JSON.stringify(doomed));
    await waitFor('the second handed loop at its gated check', () => (cli.exit() ? 'exited' : running('handed-cancel')), 300_000, 200);
    const cancel = await vscode.commands.executeCommand<{ status: string }>('forge.cancelLoop', doomed.loop);
    assert.equal(cancel.status, 'done', JSON.stringify(cancel));
    await waitFor('the cancelled loop recorded as cancelled', () => engine.runtime.get(doomed.loop!)?.status === 'cancelled', 120_000, 200);

    // Restart Loop in the window hands the restart over too: the CLI supervises the loop again.
    const restarted = await vscode.commands.executeCommand<{ status: string; detail?: { supervisorPid?: number } }>('forge.restartLoop', { ...doomed.loop, interactive: false });
    assert.equal(restarted.status, 'done', JSON.stringify(restarted));
    assert.equal(restarted.detail?.supervisorPid, cli.pid, `the CLI supervises the restarted loop: ${JSON.stringify(restarted)}`);
    assert.equal(engine.runtime.isSupervising(doomed.loop!), false);
    // Once for its start, once for its restart.
    assert.equal(cli.err().split(`supervising loop "handed-cancel" handed over by process ${process.pid}`).length - 1, 2, cli.describe());
    await waitFor('the restarted loop running under the CLI\'s lease', () => {
      const row = engine.runtime.get(doomed.loop!);
      return row?.status === 'running' && row.supervisorId?.startsWith(`${cli.pid}:cli-`);
    }, 60_000, 200);
    await openGate('handed-cancel');
    await waitFor('the restarted loop completed', () => engine.runtime.get(doomed.loop!)?.status === 'completed' || (cli.exit() ? 'exited' : false), 300_000, 200);
    assert.equal(engine.runtime.get(doomed.loop!)?.status, 'completed', cli.describe());

    await openGate('handed-loop');
    await waitFor('the handed loop completed', () => engine.runtime.get(ref)?.status === 'completed' || (cli.exit() ? 'exited' : false), 300_000, 200);
    assert.equal(engine.runtime.get(ref)?.status, 'completed', cli.describe());
    assert.equal(cli.exit(), undefined, cli.describe());

    await openGate('cli-own');
    await cli.exited;
    assert.equal(cli.exit()!.code, 0, cli.describe());
    const lines = cli.out().trim().split('\n').map((l) => JSON.parse(l) as { type: string; loop: string; status?: string });
    // The CLI prints its own loop only: the handed ones are the window's to show.
    assert.ok(lines.every((l) => l.loop === 'cli-own'), cli.describe());
    assert.equal(lines.at(-1)!.type, 'loop.ended');
    assert.equal(lines.at(-1)!.status, 'completed', cli.describe());
  });
  it('a window that found another process being the engine becomes it at a later loop, once that process has gone, and then takes the loops of runs with the settings it has now', async () => {
    const { env, api, engine, repo } = await freshWindowEngine();
    work ??= await mkdtemp(join(tmpdir(), 'forge-handover-window-'));
    const worktree = (name: string) => join(env.dataDir, 'worktrees', name);
    const running = (name: string) => existsSync(join(worktree(name), `running-${name}`));
    const openGate = (name: string) => writeFile(join(worktree(name), `gate-${name}`), '');
    const engineInfo = () => {
      try {
        return JSON.parse(readFileSync(join(env.dataDir, 'engine', 'engine.json'), 'utf8')) as { pid: number; kind: string };
      } catch {
        return undefined;
      }
    };

    // A forge run with other settings is the engine: the window's loop is not handed to it.
    const settings = windowSettings();
    settings['forge.loop.maxIterations'] = Number(settings['forge.loop.maxIterations'] ?? 15) + 2;
    const planPath = join(work, 'cli-other.md');
    await writeFile(planPath, gatedPlan('cli-other'));
    const cli = startCliRun(planPath, repo, { ...env.opencode.env, FORGE_DATA_DIR: env.dataDir }, settings);
    runs.push(cli);
    await waitFor('the CLI\'s loop at its gated check', () => (cli.exit() ? 'exited' : running('cli-other')), 300_000, 200);
    await waitFor('the CLI is the data folder\'s engine', () => engineInfo()?.pid === cli.pid, 60_000, 200);

    const execute = (name: string) =>
      vscode.commands.executeCommand<StartedResult>('forge.executePlan', { planText: gatedPlan(name), mode: 'loop', model: MOCK_MODEL, auditorModel: MOCK_MODEL, sandbox: false, maxIterations: 5 });
    const first = await execute('window-first');
    assert.equal(first.status, 'started', JSON.stringify(first));
    assert.equal(engine.runtime.isSupervising(first.loop!), true, 'other settings: the window supervises its loop itself');
    await waitFor('the window\'s first loop at its gated check', () => running('window-first'), 300_000, 200);
    // The window tried to be the engine and found the CLI being it.
    assert.equal(engineInfo()?.pid, cli.pid, cli.describe());
    await openGate('window-first');
    await openGate('cli-other');
    await waitFor('the window\'s first loop completed', () => engine.runtime.get(first.loop!)?.status === 'completed', 300_000, 200);
    await cli.exited;
    assert.equal(cli.exit()!.code, 0, cli.describe());
    await waitFor('the CLI withdrew as the engine', () => engineInfo()?.pid !== cli.pid, 60_000, 200);

    // The window's next loop makes it the engine.
    const second = await execute('window-second');
    assert.equal(second.status, 'started', JSON.stringify(second));
    assert.equal(engine.runtime.isSupervising(second.loop!), true);
    const info = await waitFor('this window is the data folder\'s engine now', () => (engineInfo()?.pid === process.pid ? engineInfo() : undefined), 60_000, 200);
    assert.equal(info!.kind, 'vscode');
    await waitFor('the window\'s second loop at its gated check', () => running('window-second'), 300_000, 200);

    // A setting changed in the window while it is the engine: a forge run with the new settings
    // is handed over (the engine compares against the window's settings now, not those it had
    // when it began listening).
    await vscode.workspace.getConfiguration('forge').update('loop.maxIterations', 9, vscode.ConfigurationTarget.Global);
    const newSettings = windowSettings();
    assert.equal(newSettings['forge.loop.maxIterations'], 9);
    const afterPath = join(work, 'cli-after.md');
    await writeFile(afterPath, gatedPlan('cli-after'));
    const after = startCliRun(afterPath, repo, { ...env.opencode.env, FORGE_DATA_DIR: env.dataDir }, newSettings);
    runs.push(after);
    try {
      await waitFor('the run with the new settings handed its loop to this window', () => (after.exit() ? 'exited' : /handed loop "cli-after"/.test(after.err())), 300_000, 200);
      assert.match(after.err(), new RegExp(`handed loop "cli-after" to the Forge engine in process ${process.pid} \\(vscode\\)`), after.describe());
      await waitFor('the handed loop at its gated check', () => running('cli-after'), 300_000, 200);
      await openGate('cli-after');
      await after.exited;
      assert.equal(after.exit()!.code, 0, after.describe());
    } finally {
      await vscode.workspace.getConfiguration('forge').update('loop.maxIterations', undefined, vscode.ConfigurationTarget.Global);
    }
    await openGate('window-second');
    await waitFor('the window\'s second loop completed', () => engine.runtime.get(second.loop!)?.status === 'completed', 300_000, 200);
  });
});
