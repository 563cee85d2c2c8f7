// The conflict radar in a real extension host (issue 14 part 4): a group launched in this window
// (forge.executePrd, the embedded scripted agents over real opencode) whose two features write the
// same file: while both loops run — each coder held by the test after its writes — the Loop
// Explorer shows the overlap under the group node and the dashboard's Group part lists it; a
// feature writing a file of its own is not in it. Released, the merge queue merges one of the two
// into the integration branch and sends the other back to coding with the conflict (its coder held
// again): the Loop Explorer and the Group part say so; released again, every feature is merged.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as vscode from 'vscode';
import type { FeatureGroupView, GroupRef } from '../../../src/core/groups/group-types';
import { embeddedAgentStep } from '../../../src/core/opencode/embedded-model';
import type { TreeSnapshotNode } from '../../../src/vscode/api';
import { buildExplorerRoot } from '../../../src/vscode/group-tree-model';
import { buildGroupPanel } from '../../../src/vscode/dashboard/group-model';
import { featureMergeDetail, featureMergeText, groupMergeSummary } from '../../../src/vscode/group-merge-text';
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
  let releaseConflict: () => void = () => {};
  let ref: GroupRef;

  before(async () => {
    const env = await forgeTestEnvironment();
    const released = new Promise<void>((resolve) => (release = resolve));
    const conflictReleased = new Promise<void>((resolve) => (releaseConflict = resolve));
    // Each coder of the group is held after it wrote its file: all three loops run, their files written.
    // The coder sent back by the merge queue with the conflict is held before it starts resolving it.
    env.model.setHandler(async (request) => {
      const text = JSON.stringify(request.messages);
      const coder = request.toolNames.includes('write') && /radar-(notes|search|catalog)/.test(text);
      if (coder && request.toolResults.some((r) => r.name === 'write')) await released;
      if (coder && text.includes('Merge conflict: this loop')) await conflictReleased;
      return embeddedAgentStep(request);
    });
  });

  after(async () => {
    release();
    releaseConflict();
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

  it('says where each feature stands in the merge queue, in one wording for the tree and the Group part', () => {
    const merge = (state: 'queued' | 'merged' | 'conflict' | 'check_failed', extra: Partial<{ message: string; commit: string; reopened: number; awaitingReopen: boolean }> = {}) => ({
      state,
      message: extra.message ?? null,
      commit: extra.commit ?? null,
      reopened: extra.reopened ?? 0,
      awaitingReopen: extra.awaitingReopen ?? false,
    });
    assert.deepEqual(
      [
        merge('queued'),
        merge('queued', { reopened: 2 }),
        merge('merged', { commit: 'abcdef0123456789' }),
        merge('conflict', { reopened: 1 }),
        merge('conflict', { awaitingReopen: true }),
        merge('check_failed', { reopened: 1 }),
        merge('check_failed', { awaitingReopen: true }),
      ].map(featureMergeText),
      [
        'queued to merge',
        'queued to merge (after 2 return(s) to coding)',
        'merged',
        'conflict — back to coding (1)',
        'conflict — waiting for a slot to go back to coding',
        'checks failed on the merged tree — back to coding (1)',
        'checks failed on the merged tree — waiting for a slot to go back to coding',
      ],
    );
    const g = { ref: { projectId: 'p', id: 'g' } };
    assert.deepEqual(featureMergeDetail(g, merge('merged', { commit: 'abcdef0123456789', reopened: 1 })), ['Merge: merged', 'Merged into forge/group/g at abcdef012345', 'After 1 return(s) to coding']);
    assert.deepEqual(featureMergeDetail(g, merge('conflict', { reopened: 1, message: 'conflict in shared.txt' })), ['Merge: conflict — back to coding (1)', 'conflict in shared.txt']);

    const base: FeatureGroupView = {
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
        { id: 'a', title: 'A', dependsOn: [], plan: '', planPath: '/d/01-a.md', status: 'completed', loopName: null, error: null, merge: merge('merged', { commit: 'abcdef0123456789' }) },
        { id: 'b', title: 'B', dependsOn: [], plan: '', planPath: '/d/02-b.md', status: 'running', loopName: null, error: null, merge: merge('conflict', { reopened: 1, message: 'conflict in shared.txt' }) },
        { id: 'c', title: 'C', dependsOn: ['a'], plan: '', planPath: '/d/03-c.md', status: 'pending', loopName: null, error: null },
      ],
      reviewDir: '/d',
      createdAt: 1,
      updatedAt: 2,
      overlaps: [],
    };
    assert.equal(groupMergeSummary(base), '1 of 3 merged');
    assert.equal(groupMergeSummary({ features: base.features.map((f) => ({ ...f, merge: null })) }), null, 'nothing said before a feature completed');
    const node = buildExplorerRoot([], [base])[0]!;
    assert.ok(node.kind === 'featureGroup');
    assert.equal(node.description, 'running · 1/3 done · 1 of 3 merged · spent $0.00, 0 tokens (no budget)');
    assert.match(node.tooltip ?? '', /\nMerged: 1 of 3 merged\nIntegration branch: forge\/group\/g\n/);
    assert.match(node.tooltip ?? '', /\n {2}a: completed, merged\n {2}b: running, conflict — back to coding \(1\)\n {2}c: pending \(after a\)/);
    assert.deepEqual(node.children.map((c) => c.description), ['completed · merged', 'running · conflict — back to coding (1)', 'pending · after a']);
    assert.match(node.children[0]!.tooltip ?? '', /\nMerge: merged\nMerged into forge\/group\/g at abcdef012345\n/);
    assert.match(node.children[1]!.tooltip ?? '', /\nMerge: conflict — back to coding \(1\)\nconflict in shared\.txt\n/);
    const panel = buildGroupPanel(base);
    assert.deepEqual([panel.mergeText, panel.integrationText], ['1 of 3 merged', 'Integration branch: forge/group/g']);
    assert.deepEqual(panel.features.map((f) => [f.id, f.mergeState, f.mergeText]), [
      ['a', 'merged', 'merged'],
      ['b', 'conflict', 'conflict — back to coding (1)'],
      ['c', null, null],
    ]);
    const review = { ...base, status: 'review' as const, features: base.features.map((f) => ({ ...f, status: 'pending' as const, merge: null })) };
    assert.deepEqual([buildGroupPanel(review).mergeText, buildGroupPanel(review).integrationText], [null, null]);
    assert.doesNotMatch(buildExplorerRoot([], [review])[0]!.tooltip ?? '', /Merged:|Integration branch/);
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

  it('released, one of the two is merged and the other goes back to coding with the conflict: the tree and the Group part say so', async () => {
    const api = await forgeApi();
    const engine = api.engine()!;
    release();
    // The conflicted loop's coder is held: the feature stays in `conflict`, back to coding once.
    const node = await waitFor('a feature loop back to coding with the conflict in the Loop Explorer', async () => {
      const n = await groupNode('radar');
      return n?.children.some((c) => / · conflict — back to coding \(1\)$/.test(c.description ?? '')) ? n : undefined;
    }, 300_000, 500);
    const view = engine.groups.get(ref)!;
    const conflicted = view.features.find((f) => f.merge?.state === 'conflict')!;
    assert.ok(conflicted, JSON.stringify(view.features.map((f) => [f.id, f.status, f.merge])));
    assert.ok(['notes', 'search'].includes(conflicted.id), `the conflict is on shared.txt, not ${conflicted.id}`);
    assert.deepEqual([conflicted.status, conflicted.merge!.reopened], ['running', 1]);
    const other = conflicted.id === 'notes' ? 'search' : 'notes';
    assert.equal(view.features.find((f) => f.id === other)!.merge?.state, 'merged', 'the first of the two merged cleanly');
    const byLabel = new Map(node.children.map((c) => [c.label, c]));
    assert.match(byLabel.get(`radar-${conflicted.id}`)?.description ?? '', / · conflict — back to coding \(1\)$/);
    assert.match(byLabel.get(`radar-${conflicted.id}`)?.tooltip ?? '', /\nMerge: conflict — back to coding \(1\)\nMerging .* conflicts in shared\.txt/);
    assert.match(byLabel.get(`radar-${other}`)?.description ?? '', / · merged$/);
    assert.match(byLabel.get(`radar-${other}`)?.tooltip ?? '', /\nMerge: merged\nMerged into forge\/group\/radar at [0-9a-f]{12}/);
    assert.match(node.description ?? '', /^running · \d\/3 done · \d of 3 merged · /);
    assert.match(node.tooltip ?? '', /\nIntegration branch: forge\/group\/radar\n/);
    await vscode.commands.executeCommand('forge.openDashboard', { projectId: ref.projectId, groupId: ref.id });
    const probe = await waitFor('the conflict in the Group part', async () => {
      const p = await api.dashboard().probe();
      return p.group?.id === 'radar' && p.group.merges.includes(`${conflicted.id}: conflict — back to coding (1)`) ? p : undefined;
    }, 60_000, 500);
    assert.equal(probe.group!.integration, 'Integration branch: forge/group/radar');
    assert.ok(probe.group!.merges.includes(`${other}: merged`), probe.group!.merges.join('\n'));
  });

  it('released again, the group completes with every feature merged and the overlap gone (screenshot)', async () => {
    const api = await forgeApi();
    const engine = api.engine()!;
    releaseConflict();
    const ended = await engine.groups.waitForEnd(ref);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.features.map((f) => [f.id, f.status, f.error])));
    assert.deepEqual(ended.features.map((f) => f.merge?.state), ['merged', 'merged', 'merged']);
    const node = await waitFor('the group node without overlaps', async () => {
      const n = await groupNode('radar');
      return n?.contextValue === 'forge.group.ended' && !n.children.some((c) => c.id.startsWith('overlap:')) ? n : undefined;
    }, 60_000, 500);
    assert.doesNotMatch(node.description ?? '', /overlapping/);
    assert.match(node.description ?? '', /^completed · 3\/3 done · 3 of 3 merged · /);
    assert.match(node.tooltip ?? '', /\nMerged: 3 of 3 merged\nIntegration branch: forge\/group\/radar\n/);
    assert.deepEqual(
      node.children.map((c) => [c.label, / · merged$/.test(c.description ?? '')]),
      ['notes', 'search', 'catalog'].map((id) => [`radar-${id}`, true]),
    );
    const reopenedOne = ended.features.find((f) => (f.merge?.reopened ?? 0) > 0)!;
    assert.ok(reopenedOne, 'one feature went back to coding with the conflict');
    assert.match(node.children.find((c) => c.label === `radar-${reopenedOne.id}`)?.tooltip ?? '', /\nMerge: merged\nMerged into forge\/group\/radar at [0-9a-f]{12}\nAfter 1 return\(s\) to coding/);
    const probe = await waitFor('every feature merged in the Group part', async () => {
      const p = await api.dashboard().probe();
      return p.group?.id === 'radar' && p.group.merged === '3 of 3 merged' ? p : undefined;
    }, 60_000, 500);
    assert.deepEqual(probe.group!.merges, ['notes: merged', 'search: merged', 'catalog: merged']);
    if (harnessInfo().host === 'code-server') {
      await vscode.commands.executeCommand('forge.loopExplorer.focus');
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(readFileSync(await requestScreenshot('feature-group-merged')).subarray(0, 8), PNG_SIGNATURE);
    }
  });
});

after(() => disposeForgeTestEnvironment());
