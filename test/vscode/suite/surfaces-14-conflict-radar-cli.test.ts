// The conflict radar in a real extension host for a group this window does not drive (issue 14
// part 4): a separate `forge` CLI process (the built dist/cli.mjs) on the window's data folder
// splits and launches a group whose two features write the same file, over real opencode and the
// window's scripted model (each coder held by the test after its writes). The window's engine
// supervises none of the loops, yet its Loop Explorer shows the overlap under the group node (and
// the dashboard's Group part lists it): the window reads the radar of groups other processes drive. Released, the CLI ends the group and the
// window's last reading takes the overlap away.
import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { embeddedAgentStep } from '../../../src/core/opencode/embedded-model';
import type { TreeSnapshotNode } from '../../../src/vscode/api';
import { nextRadarReading, RADAR_IDLE_MS, RADAR_RUNNING_MS } from '../../../src/vscode/loops-model';
import { forgeApi, forgeTestEnvironment, MOCK_MODEL, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo } from './support/harness';

function feature(id: string, title: string, file: string, content: string): string {
  return [`## Feature ${id}: ${title}`, '', `### Write ${file}`, `\`\`\`txt file=${file}`, content, '```', ''].join('\n');
}

const PRD = ['# Radar from the CLI', '', feature('notes', 'Release notes', 'shared-cli.txt', 'notes'), feature('search', 'Search', 'shared-cli.txt', 'search'), feature('catalog', 'Catalog', 'catalog-cli.txt', 'apples')].join('\n');
const GROUP = 'radarcli';

async function groupNode(): Promise<TreeSnapshotNode | undefined> {
  await vscode.commands.executeCommand('forge.refreshLoops');
  return (await forgeApi()).treeSnapshot().find((n) => n.id.startsWith('featureGroup:') && n.id.endsWith(`/${GROUP}`));
}

describe('the conflict radar in VS Code for a group the forge CLI runs', function () {
  this.timeout(900_000);
  this.bail(true);
  reportFailuresEarly();
  let release: () => void = () => {};
  let cli: ChildProcess | undefined;
  let cliExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let cliExited: Promise<void> = Promise.resolve();
  let output = '';
  let prdDir: string | undefined;
  const describeCli = () => `forge group … (exit ${JSON.stringify(cliExit)})\n${output}`;

  before(async () => {
    const env = await forgeTestEnvironment();
    const released = new Promise<void>((resolve) => (release = resolve));
    // Each coder of the CLI's group is held after it wrote its file: all three loops run, their files written.
    env.model.setHandler(async (request) => {
      const coder = request.toolNames.includes('write') && /radarcli-(notes|search|catalog)/.test(JSON.stringify(request.messages));
      if (coder && request.toolResults.some((r) => r.name === 'write')) await released;
      return embeddedAgentStep(request);
    });
  });

  after(async () => {
    release();
    (await forgeTestEnvironment()).model.setHandler(undefined);
    // A CLI still running is paused (SIGTERM: its loops stop, nothing lost), then its process group ends.
    const signal = (name: NodeJS.Signals) => {
      try {
        if (cli?.pid && !cliExit) process.kill(-cli.pid, name);
      } catch {
        // Gone meanwhile.
      }
    };
    signal('SIGTERM');
    await Promise.race([cliExited, new Promise((r) => setTimeout(r, 30_000))]);
    signal('SIGKILL');
    if (prdDir) await rm(prdDir, { recursive: true, force: true });
  });

  it('paces the readings of groups other processes drive: soon when first seen, every few seconds while a loop runs, seldom while none does, once after the group stopped, never for its own', () => {
    const none = { last: undefined, runningLoop: true, drivenHere: false };
    assert.equal(nextRadarReading({ status: 'running' }, none), 0);
    assert.equal(nextRadarReading({ status: 'paused' }, { ...none, runningLoop: false }), 0);
    assert.equal(nextRadarReading({ status: 'running' }, { ...none, last: { at: 1_000, status: 'running' } }), 1_000 + RADAR_RUNNING_MS);
    assert.equal(nextRadarReading({ status: 'running' }, { last: { at: 1_000, status: 'running' }, runningLoop: false, drivenHere: false }), 1_000 + RADAR_IDLE_MS);
    assert.equal(nextRadarReading({ status: 'paused' }, { last: { at: 1_000, status: 'running' }, runningLoop: false, drivenHere: false }), 1_000 + RADAR_RUNNING_MS);
    assert.ok(RADAR_RUNNING_MS >= 1_000 && RADAR_IDLE_MS > RADAR_RUNNING_MS);
    // Driven by this window: its service reads the radar by itself.
    assert.equal(nextRadarReading({ status: 'running' }, { ...none, drivenHere: true }), undefined);
    // Ended: read once more when it was seen live (its overlaps go), else never; review: nothing to read.
    assert.equal(nextRadarReading({ status: 'completed' }, { ...none, last: { at: 1_000, status: 'running' } }), 1_000 + RADAR_RUNNING_MS);
    assert.equal(nextRadarReading({ status: 'completed' }, { ...none, last: { at: 5_000, status: 'completed' } }), undefined);
    assert.equal(nextRadarReading({ status: 'cancelled' }, none), undefined);
    assert.equal(nextRadarReading({ status: 'review' }, none), undefined);
  });

  it('a group the CLI launched, two of its running loops writing the same file: the Loop Explorer shows the overlap under the group node', async () => {
    const env = await forgeTestEnvironment();
    const api = await forgeApi();
    const engine = await api.startEngine();
    const cliPath = join(harnessInfo().extensionPath, 'dist', 'cli.mjs');
    assert.ok(existsSync(cliPath), `${cliPath} is missing: build it with node esbuild.mjs`);
    prdDir = await mkdtemp(join(tmpdir(), 'forge-radar-cli-'));
    const prd = join(prdDir, 'radar.md');
    await writeFile(prd, PRD);
    const repo = harnessInfo().workspaceFolder;
    cli = spawn(
      process.execPath,
      [cliPath, 'group', prd, '--repo', repo, '--name', GROUP, '--launch', '--max-concurrent', '3', '--json', '--splitter-model', MOCK_MODEL, '--model', MOCK_MODEL, '--auditor-model', MOCK_MODEL, '--no-sandbox'],
      {
        env: {
          ...process.env,
          ...env.opencode.env,
          FORGE_DATA_DIR: env.dataDir,
          // The coders are held for as long as the test needs: no watchdog re-prompts them meanwhile.
          FORGE_SETTINGS: JSON.stringify({ 'forge.loop.stallTimeoutMs': 600_000, 'forge.loop.busyStallTimeoutMs': 600_000 }),
        },
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    cli.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    cli.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    cliExited = new Promise((resolve) => cli!.once('close', (code, signal) => resolve(void (cliExit = { code, signal }))));

    const node = await waitFor('the overlap under the group node of the CLI\'s group', async () => {
      if (cliExit) return 'exited' as const;
      const n = await groupNode();
      return n?.children.some((c) => c.id.startsWith('overlap:')) ? n : undefined;
    }, 400_000, 500);
    assert.notEqual(node, 'exited', describeCli());
    if (node === 'exited') return;
    const overlaps = node.children.filter((c) => c.id.startsWith('overlap:'));
    assert.deepEqual(overlaps.map((c) => [c.label, c.description, c.icon]), [['Overlap: shared-cli.txt', 'changed by notes, search', 'warning']], describeCli());
    assert.match(node.description ?? '', /^running · 0\/3 done · .* · ⚠ 1 overlapping file\(s\)$/);

    // The CLI drives the group: this window supervises none of its loops, and its service read the radar.
    const { projectId } = await engine.runtime.projectOf(repo);
    const group = engine.groups.get({ projectId, id: GROUP })!;
    assert.deepEqual(group.features.map((f) => [f.id, f.status]), [['notes', 'running'], ['search', 'running'], ['catalog', 'running']]);
    for (const f of group.features) assert.equal(engine.runtime.isSupervising({ projectId: group.ref.projectId, name: f.loopName! }), false, `${f.loopName} is supervised by this window`);
    assert.deepEqual(group.overlaps, [{ file: 'shared-cli.txt', features: ['notes', 'search'], loops: ['radarcli-notes', 'radarcli-search'] }]);

    // The dashboard's Group part reads the same model.
    await vscode.commands.executeCommand('forge.openDashboard', { projectId, groupId: GROUP });
    const probe = await waitFor('the overlap in the Group part', async () => {
      const p = await api.dashboard().probe();
      return p.group?.id === GROUP && p.group.overlaps.length > 0 ? p : undefined;
    }, 60_000, 500);
    assert.deepEqual(probe.group!.overlaps, ['shared-cli.txt — changed by notes, search']);
  });

  it('released, the CLI completes the group and the overlap leaves the Loop Explorer', async () => {
    release();
    await cliExited;
    assert.equal(cliExit?.code, 0, describeCli());
    const node = await waitFor('the CLI\'s group node ended, without overlaps', async () => {
      const n = await groupNode();
      return n?.contextValue === 'forge.group.ended' && !n.children.some((c) => c.id.startsWith('overlap:')) ? n : undefined;
    }, 60_000, 500);
    assert.doesNotMatch(node.description ?? '', /overlapping/);
    assert.match(node.description ?? '', /^completed · 3\/3 done/);
  });
});
