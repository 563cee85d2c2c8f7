// The conflict radar in a real extension host (issue 14 part 4): a group launched in this window
// (forge.executePrd, the embedded scripted agents over real opencode) whose two features write the
// same file: while both loops run — each coder held by the test after its writes — the Loop
// Explorer shows the overlap under the group node and the dashboard's Group part lists it; a
// feature writing a file of its own is not in it. Released, the group completes and the overlap goes.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as vscode from 'vscode';
import type { FeatureGroupView, GroupRef } from '../../../src/core/groups/group-types';
import { embeddedAgentStep } from '../../../src/core/opencode/embedded-model';
import type { TreeSnapshotNode } from '../../../src/vscode/api';
import { buildExplorerRoot } from '../../../src/vscode/group-tree-model';
import { buildGroupPanel } from '../../../src/vscode/dashboard/group-model';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, MOCK_MODEL, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo, requestScreenshot } from './support/harness';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function feature(id: string, title: string, file: string, content: string): string {
  return [`## Feature ${id}: ${title}`, '', `### Write ${file}`, `\`\`\`txt file=${file}`, content, '```', ''].join('\n');
}

const RADAR_PRD = ['# Radar', '', feature('notes', 'Release notes', 'shared.txt', 'notes'), feature('search', 'Search', 'shared.txt', 'search'), feature('catalog', 'Catalog', 'catalog.txt', 'apples')].join('\n');

async function groupNode(id: string): Promise<TreeSnapshotNode | undefined> {
  await vscode.commands.executeCommand('forge.refreshLoops');
  return (await forgeApi()).treeSnapshot().find((n) => n.id.startsWith('featureGroup:') && n.id.endsWith(`/${id}`));
}

describe('the conflict radar in VS Code: overlaps in the Loop Explorer and the dashboard', function () {
  this.timeout(900_000);
  this.bail(true);
  reportFailuresEarly();
  let release: () => void = () => {};
  let ref: GroupRef;

  before(async () => {
    const env = await forgeTestEnvironment();
    const released = new Promise<void>((resolve) => (release = resolve));
    // Each coder of the group is held after it wrote its file: all three loops run, their files written.
    env.model.setHandler(async (request) => {
      const coder = request.toolNames.includes('write') && /radar-(notes|search|catalog)/.test(JSON.stringify(request.messages));
      if (coder && request.toolResults.some((r) => r.name === 'write')) await released;
      return embeddedAgentStep(request);
    });
  });

  after(async () => {
    release();
    (await forgeTestEnvironment()).model.setHandler(undefined);
  });

  it('builds an overlap child under the group node and a list in the Group part, in words', () => {
    const view: FeatureGroupView = {
      ref: { projectId: 'p', id: 'g' },
      title: 'Group',
      source: 'prd.md',
      repoDir: '/repo',
      status: 'running',
      pauseReason: null,
      maxConcurrent: 3,
      budget: { money: null, tokens: null },
      spend: { cost: 0, tokens: 0 },
      budgetWarned: false,
      features: [
        { id: 'a', title: 'A', dependsOn: [], plan: '', planPath: '/d/01-a.md', status: 'running', loopName: null, error: null },
        { id: 'b', title: 'B', dependsOn: [], plan: '', planPath: '/d/02-b.md', status: 'running', loopName: null, error: null },
      ],
      reviewDir: '/d',
      createdAt: 1,
      updatedAt: 2,
      overlaps: [{ file: 'src/x.ts', features: ['a', 'b'], loops: ['g-a', 'g-b'] }],
    };
    const group = buildExplorerRoot([], [view])[0]!;
    assert.ok(group.kind === 'featureGroup');
    assert.equal(group.description, 'running · 0/2 done · spent $0.00, 0 tokens (no budget) · ⚠ 1 overlapping file(s)');
    assert.deepEqual(group.children.map((c) => [c.kind, c.label, c.description]), [
      ['feature', 'a — A', 'running'],
      ['feature', 'b — B', 'running'],
      ['overlap', 'Overlap: src/x.ts', 'changed by a, b'],
    ]);
    assert.match(group.children[2]!.tooltip ?? '', /src\/x\.ts is changed by more than one running loop of group g: a, b\.\nLoops: g-a, g-b/);
    assert.match(group.tooltip ?? '', /Overlap: src\/x\.ts — changed by a, b/);
    const panel = buildGroupPanel(view);
    assert.deepEqual(panel.overlaps, [{ file: 'src/x.ts', features: ['a', 'b'], text: 'src/x.ts — changed by a, b' }]);
    assert.match(panel.overlapNote ?? '', /^Overlapping files: 1 file\(s\) changed by more than one running loop\./);
    const none = buildGroupPanel({ ...view, overlaps: [] });
    assert.deepEqual([none.overlaps, none.overlapNote], [[], null]);
    assert.equal(buildExplorerRoot([], [{ ...view, overlaps: [] }])[0]!.description, 'running · 0/2 done · spent $0.00, 0 tokens (no budget)');
  });

  it('two running loops writing the same file: the overlap shows under the group node and in the Group part (screenshot); not the loop of its own file', async () => {
    const api = await forgeApi();
    await api.startEngine();
    const result = await vscode.commands.executeCommand<{ status: string; detail?: { group: GroupRef }; message?: string }>('forge.executePrd', {
      prdText: RADAR_PRD,
      id: 'radar',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      sandbox: false,
      maxConcurrent: 3,
      budget: { money: null, tokens: null },
      launch: true,
    });
    assert.equal(result.status, 'done', result.message);
    ref = result.detail!.group;
    const node = await waitFor('the overlap under the group node', async () => {
      const n = await groupNode('radar');
      return n?.children.some((c) => c.id.startsWith('overlap:')) ? n : undefined;
    }, 300_000, 500);
    const overlaps = node.children.filter((c) => c.id.startsWith('overlap:'));
    assert.deepEqual(overlaps.map((c) => [c.label, c.description, c.icon]), [['Overlap: shared.txt', 'changed by notes, search', 'warning']]);
    assert.match(node.description ?? '', /^running · 0\/3 done · .* · ⚠ 1 overlapping file\(s\)$/);
    assert.equal(api.engine()!.groups.get(ref)?.features.every((f) => f.status === 'running'), true, 'all three loops still run');

    await vscode.commands.executeCommand('forge.openDashboard', { projectId: ref.projectId, groupId: ref.id });
    const probe = await waitFor('the overlap in the Group part', async () => {
      const p = await api.dashboard().probe();
      return p.group?.id === 'radar' && p.group.overlaps.length > 0 ? p : undefined;
    }, 60_000, 500);
    assert.deepEqual(probe.group!.overlaps, ['shared.txt — changed by notes, search']);
    if (harnessInfo().host === 'code-server') {
      await new Promise((r) => setTimeout(r, 1000));
      assert.deepEqual(readFileSync(await requestScreenshot('conflict-radar-dashboard')).subarray(0, 8), PNG_SIGNATURE);
      await vscode.commands.executeCommand('forge.loopExplorer.focus');
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(readFileSync(await requestScreenshot('conflict-radar-loop-explorer')).subarray(0, 8), PNG_SIGNATURE);
    }
  });

  it('released, the group completes and the overlap is gone', async () => {
    const engine = (await forgeApi()).engine()!;
    release();
    const ended = await engine.groups.waitForEnd(ref);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.features.map((f) => [f.id, f.status, f.error])));
    const node = await waitFor('the group node without overlaps', async () => {
      const n = await groupNode('radar');
      return n?.contextValue === 'forge.group.ended' && !n.children.some((c) => c.id.startsWith('overlap:')) ? n : undefined;
    }, 60_000, 500);
    assert.doesNotMatch(node.description ?? '', /overlapping/);
  });
});

after(() => disposeForgeTestEnvironment());
