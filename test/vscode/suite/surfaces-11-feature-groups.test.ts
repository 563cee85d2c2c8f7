// Feature groups in a real extension host (issue 14 part 3, issue 16's group budget): Execute PRD
// through the palette splits a 3-feature PRD (the embedded scripted splitter reads its
// "## Feature <id>: <title>" sections over real opencode), the review notification's
// "Launch Group" starts it; the Loop Explorer shows the group with its loops and its pending
// feature (never the loops again at top level); the dashboard's Group part; the group completes.
// Then a tiny token budget pauses a group (budget_reached), said once; a resume without room is
// refused in the service's words; "Resume Group…" on the notification with a higher budget completes it.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { FeatureGroupView, GroupRef } from '../../../src/core/groups/group-types';
import { embeddedAgentStep } from '../../../src/core/opencode/embedded-model';
import type { ScriptedRequest } from '../../support/scripted-model';
import type { TreeSnapshotNode } from '../../../src/vscode/api';
import { groupSpendText, suggestedGroupBudget } from '../../../src/vscode/group-budget-text';
import { buildExplorerRoot, GROUP_CONTEXT } from '../../../src/vscode/group-tree-model';
import { buildGroupPanel } from '../../../src/vscode/dashboard/group-model';
import type { LoopSummary } from '../../../src/vscode/loop-tree-model';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, MOCK_MODEL, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo, requestScreenshot, requestWorkbench } from './support/harness';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function feature(id: string, title: string, file: string, content: string, dependsOn?: string): string {
  return [`## Feature ${id}: ${title}`, ...(dependsOn ? [`Depends on: ${dependsOn}`] : []), '', `### Write ${file}`, `\`\`\`txt file=${file}`, content, '```', ''].join('\n');
}

const SHOP_PRD = ['# Shop', '', 'A tiny shop in three features.', '', feature('a', 'Catalog', 'catalog.txt', 'apples'), feature('b', 'Basket', 'basket.txt', 'empty'), feature('c', 'Checkout', 'checkout.txt', 'pay', 'a')].join('\n');
const THRIFT_PRD = ['# Thrift', '', feature('one', 'One', 'one.txt', '1'), feature('two', 'Two', 'two.txt', '2')].join('\n');

const isCoderOf = (request: ScriptedRequest, loopName: string) => request.toolNames.includes('write') && JSON.stringify(request.messages).includes(loopName);

function findGroupNode(tree: readonly TreeSnapshotNode[], id: string): TreeSnapshotNode | undefined {
  return tree.find((n) => n.id.startsWith('featureGroup:') && n.id.endsWith(`/${id}`));
}

async function tree(): Promise<readonly TreeSnapshotNode[]> {
  await vscode.commands.executeCommand('forge.refreshLoops');
  return (await forgeApi()).treeSnapshot();
}

describe('feature groups in VS Code: Execute PRD, Loop Explorer, dashboard, group budget', function () {
  this.timeout(900_000);
  this.bail(true);
  reportFailuresEarly();
  const prdFile = join(harnessInfo().workspaceFolder, 'shop-prd.md');
  let releaseCatalog: () => void = () => {};
  let shop: GroupRef;

  before(async () => {
    const env = await forgeTestEnvironment();
    const catalogReleased = new Promise<void>((resolve) => (releaseCatalog = resolve));
    // Forge's embedded scripted agents play splitter, coder and auditor; the coders of a and b wait
    // for the test, so the group is seen running (two loops under the cap of 2) with c pending on a.
    env.model.setHandler(async (request) => {
      if (isCoderOf(request, 'shop-a') || isCoderOf(request, 'shop-b')) await catalogReleased;
      return embeddedAgentStep(request);
    });
    await writeFile(prdFile, SHOP_PRD);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(prdFile));
  });

  after(async () => {
    releaseCatalog();
    (await forgeTestEnvironment()).model.setHandler(undefined);
    await rm(prdFile, { force: true });
  });

  it('says spend against budget in one wording and suggests a higher budget for a spent limit', () => {
    assert.equal(groupSpendText({ money: 1, tokens: null }, { cost: 0.4, tokens: 1200 }), 'spent $0.40 of $1.00 (40 %)');
    assert.equal(groupSpendText({ money: null, tokens: 5000 }, { cost: 0, tokens: 4000 }), 'spent 4,000 tokens of 5,000 tokens (80 %)');
    assert.equal(groupSpendText({ money: null, tokens: null }, { cost: 0.5, tokens: 10 }), 'spent $0.50, 10 tokens (no budget)');
    assert.deepEqual(suggestedGroupBudget({ money: null, tokens: 1 }, { cost: 0, tokens: 1000 }), { money: null, tokens: 1500 });
    assert.deepEqual(suggestedGroupBudget({ money: 2, tokens: 10 }, { cost: 1, tokens: 10 }), { money: 2, tokens: 15 });
  });

  it('builds group nodes by status: a blocked feature with its reason, the warning mark, the group\'s loops only under it', () => {
    const view = (status: FeatureGroupView['status'], over: Partial<FeatureGroupView> = {}): FeatureGroupView => ({
      ref: { projectId: 'p', id: 'g' },
      title: 'Group',
      source: 'prd.md',
      repoDir: '/repo',
      status,
      pauseReason: status === 'paused' ? 'budget_reached' : null,
      maxConcurrent: 2,
      budget: { money: 1, tokens: null },
      spend: { cost: 0.85, tokens: 10 },
      budgetWarned: true,
      features: [
        { id: 'a', title: 'A', dependsOn: [], plan: '', planPath: '/d/01-a.md', status: 'failed', loopName: 'g-a', error: 'Its loop g-a ended errored.' },
        { id: 'b', title: 'B', dependsOn: ['a'], plan: '', planPath: '/d/02-b.md', status: 'blocked', loopName: null, error: 'Blocked: a failed.' },
      ],
      reviewDir: '/d',
      createdAt: 1,
      updatedAt: 2,
      overlaps: [],
      ...over,
    });
    const loop = (name: string): LoopSummary => ({
      loop: { projectId: 'p', name, status: 'errored', phase: 'coding', kind: 'plan', iteration: 1, maxIterations: 5, sectionIndex: null, worktreeDir: null, branch: null, terminationReason: 'errored', model: null, auditorModel: null, sandbox: false, supervisorId: null, leaseExpiresAt: null, updatedAt: 1, endedAt: 1, state: {} },
      openFindings: { bug: 0, warning: 0 },
      usage: undefined,
      pseudoFindings: [],
      supervisedHere: false,
    });
    const root = buildExplorerRoot([loop('g-a'), loop('g-b'), loop('other')], [view('failed')]);
    assert.deepEqual(root.map((n) => n.label), ['g — Group', 'Recent']);
    const group = root[0]!;
    assert.ok(group.kind === 'featureGroup');
    assert.equal(group.contextValue, GROUP_CONTEXT.failed);
    assert.equal(group.description, 'failed · 0/2 done · spent $0.85 of $1.00 (85 %) ⚠');
    assert.deepEqual(group.children.map((c) => [c.kind, c.label, c.description]), [
      ['loop', 'g-a', 'errored · iter 1'],
      ['feature', 'b — B', 'blocked · after a · Blocked: a failed.'],
    ]);
    // g-b is named like b's loop before the store records it: shown under the group only.
    assert.ok(root[1]!.kind === 'group' && root[1]!.loops.map((l) => l.name).join() === 'other');
    assert.deepEqual(['review', 'running', 'paused', 'completed'].map((s) => buildExplorerRoot([], [view(s as FeatureGroupView['status'])])[0]!.contextValue), [
      'forge.group.review',
      'forge.group.running',
      'forge.group.paused',
      'forge.group.ended',
    ]);
    const panel = buildGroupPanel(view('paused', { spend: { cost: 1, tokens: 10 } }));
    assert.equal(panel.statusText, 'paused: budget reached');
    assert.equal(panel.budgetState, 'reached');
    assert.deepEqual(panel.actions, ['resume', 'cancel']);
    assert.match(panel.budgetNote ?? '', /^Paused: the group budget is spent \(spent \$1\.00 of \$1\.00 \(100 %\)\)/);
    assert.equal(buildGroupPanel(view('running')).budgetNote, '85 % of the group budget used (spent $0.85 of $1.00 (85 %)): at 100 % the group pauses.');
  });

  it('Execute PRD through the palette splits the open PRD; "Launch Group" on the review notification starts it', async () => {
    const api = await forgeApi();
    await api.startEngine();
    await requestWorkbench('command', { title: 'Forge: Execute PRD' });
    await requestWorkbench('quick-input', { expect: 'Model for coding sessions', pick: MOCK_MODEL });
    await requestWorkbench('quick-input', { expect: 'Model for audit sessions', pick: MOCK_MODEL });
    await requestWorkbench('quick-input', { expect: 'Confine the agents in a sandbox?', pick: 'Unconfined' });
    await requestWorkbench('quick-input', { expect: 'feature loops may run at once', value: '2' });
    await requestWorkbench('quick-input', { expect: 'Group budget in money', value: '' });
    await requestWorkbench('quick-input', { expect: 'Group budget in tokens', value: '' });
    await waitFor('the review notification', () => api.notifications().some((n) => n.message.includes('split into 3 features')), 240_000, 500).catch((error: Error) => {
      throw new Error(`${error.message}; notifications: ${api.notifications().map((n) => n.message).join(' | ')}`);
    });
    const review = await requestWorkbench<{ message: string; buttons: string[] }>('notification', { contains: 'split into 3 features', button: 'Launch Group', timeoutMs: 240_000 });
    assert.match(review.message, /shop-prd\.md split into 3 features \(a, b, c\)/);
    assert.deepEqual(review.buttons, ['Launch Group', 'Review First']);
    const engine = api.engine()!;
    const { projectId } = await engine.runtime.projectOf(harnessInfo().workspaceFolder);
    const group = await waitFor('the group to run', () => {
      const g = engine.groups.list(projectId).find((x) => x.source.endsWith('shop-prd.md'));
      return g && g.status === 'running' && g.features.filter((f) => f.status === 'running').length === 2 ? g : undefined;
    }, 120_000, 250);
    shop = group.ref;
    assert.deepEqual(group.features.map((f) => [f.id, f.title, f.dependsOn]), [['a', 'Catalog', []], ['b', 'Basket', []], ['c', 'Checkout', ['a']]]);
    assert.equal(group.maxConcurrent, 2);
    assert.deepEqual(group.budget, { money: null, tokens: null });
    // The review opened each feature's plan (the review copies the launch read back).
    const open = vscode.workspace.textDocuments.map((d) => d.uri.fsPath);
    for (const f of group.features) assert.ok(open.includes(f.planPath), `${f.planPath} opened for review (open: ${open.join(', ')})`);
  });

  it('shows the group in the Loop Explorer: its running loops and pending feature as children, none of them at top level', async () => {
    const node = await waitFor('the group node with two loops', async () => {
      const n = findGroupNode(await tree(), shop.id);
      return n && n.children.filter((c) => c.id.startsWith('loop:')).length === 2 ? n : undefined;
    }, 60_000, 500);
    assert.equal(node.label, `${shop.id} — Shop`);
    assert.match(node.description ?? '', /^running · 0\/3 done · spent \$0\.00, [\d,]+ tokens \(no budget\)$/);
    assert.equal(node.contextValue, 'forge.group.running');
    assert.equal(node.icon, 'sync~spin');
    assert.deepEqual(node.children.map((c) => c.label), [`${shop.id}-a`, `${shop.id}-b`, 'c — Checkout']);
    const pending = node.children[2]!;
    assert.equal(pending.description, 'pending · after a');
    assert.equal(pending.icon, 'circle-large-outline');
    assert.match(pending.tooltip ?? '', /Depends on: a/);
    assert.match(node.children[0]!.contextValue ?? '', /^forge\.loop\./, 'a feature loop is a loop node with the loop menus');
    const topLevel = (await forgeApi()).treeSnapshot().filter((n) => n.id.startsWith('group:')).flatMap((n) => n.children.map((c) => c.label));
    assert.deepEqual(topLevel.filter((l) => l.startsWith(`${shop.id}-`)), [], `group loops are not listed again under Running / Recent (${topLevel.join(', ')})`);
    if (harnessInfo().host === 'code-server') {
      await vscode.commands.executeCommand('forge.loopExplorer.focus');
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(readFileSync(await requestScreenshot('feature-group-in-loop-explorer')).subarray(0, 8), PNG_SIGNATURE);
    }
  });

  it('the dashboard opened on the group shows its Group part: progress, spend, each feature', async () => {
    const api = await forgeApi();
    await vscode.commands.executeCommand('forge.openDashboard', { projectId: shop.projectId, groupId: shop.id });
    const probe = await waitFor('the Group part', async () => {
      const p = await api.dashboard().probe();
      return p.group?.id === shop.id && p.group.features.length === 3 ? p : undefined;
    }, 60_000, 500);
    assert.equal(probe.group!.status, 'running');
    assert.equal(probe.group!.progress, '0/3 done');
    assert.match(probe.group!.spend, /^spent \$0\.00, [\d,]+ tokens \(no budget\)$/);
    assert.deepEqual(probe.group!.features, ['a: running', 'b: running', 'c: pending']);
    assert.deepEqual(probe.group!.actions, ['Cancel Group']);
    assert.ok(probe.selectedLoop?.startsWith(`${shop.id}-`), `a loop of the group is shown with it (${probe.selectedLoop})`);
    if (harnessInfo().host === 'code-server') {
      await new Promise((r) => setTimeout(r, 1000));
      assert.deepEqual(readFileSync(await requestScreenshot('feature-group-dashboard')).subarray(0, 8), PNG_SIGNATURE);
    }
  });

  it('runs the group to completion: c after a; the tree, the dashboard and a notification say so', async () => {
    const api = await forgeApi();
    const engine = api.engine()!;
    releaseCatalog();
    const ended = await engine.groups.waitForEnd(shop);
    assert.equal(ended.status, 'completed', JSON.stringify(ended.features.map((f) => [f.id, f.status, f.error])));
    const node = await waitFor('the completed group node', async () => {
      const n = findGroupNode(await tree(), shop.id);
      return n?.contextValue === 'forge.group.ended' ? n : undefined;
    }, 30_000, 500);
    assert.match(node.description ?? '', /^completed · 3\/3 done · 3 of 3 merged · /);
    assert.match(node.tooltip ?? '', new RegExp(`Merged: 3 of 3 merged\nIntegration branch: forge/group/${shop.id}\n`));
    assert.ok(node.children.every((c) => / · merged$/.test(c.description ?? '')), JSON.stringify(node.children.map((c) => c.description)));
    assert.deepEqual(node.children.map((c) => c.label), ['a', 'b', 'c'].map((id) => `${shop.id}-${id}`));
    assert.ok(node.children.every((c) => c.icon === 'pass-filled'));
    await waitFor('the completion notification', () => api.notifications().some((n) => n.message.includes(`"${shop.id}" completed`)), 30_000);
    const probe = await waitFor('the Group part completed', async () => {
      const p = await api.dashboard().probe();
      return p.group?.progress === '3/3 done' && p.group.merged === '3 of 3 merged' ? p : undefined;
    }, 30_000, 500);
    assert.deepEqual(probe.group!.actions, []);
    assert.equal(probe.group!.merged, '3 of 3 merged');
    assert.equal(probe.group!.integration, `Integration branch: forge/group/${shop.id}`);
  });

  it('a tiny token budget pauses the group (budget_reached), said once; a resume without room is refused; "Resume Group…" with more completes it', async () => {
    const api = await forgeApi();
    const engine = api.engine()!;
    const result = await vscode.commands.executeCommand<{ status: string; detail?: { group: GroupRef }; message?: string }>('forge.executePrd', {
      prdText: THRIFT_PRD,
      id: 'thrift',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      sandbox: false,
      maxConcurrent: 2,
      budget: { money: null, tokens: 1 },
      launch: true,
    });
    assert.equal(result.status, 'done', result.message);
    const ref = result.detail!.group;
    assert.equal(ref.id, 'thrift');
    const paused = await waitFor('the group to pause with no loop running', () => {
      const g = engine.groups.get(ref);
      return g && g.status === 'paused' && !g.features.some((f) => f.status === 'running') ? g : undefined;
    }, 300_000, 500);
    assert.equal(paused.pauseReason, 'budget_reached');
    // The service also reports the end of a paused group: the pause is still said only once.
    await new Promise((r) => setTimeout(r, 1500));
    const pauses = api.notifications().filter((n) => n.message.includes('"thrift"') && /budget (reached|is spent)/.test(n.message));
    assert.equal(pauses.length, 1, pauses.map((n) => n.message).join('\n'));
    assert.ok(api.notifications().filter((n) => n.message.includes('"thrift"') && /% of group/.test(n.message)).length <= 1, 'the 80 % warning at most once');

    const node = findGroupNode(await tree(), 'thrift')!;
    assert.equal(node.contextValue, 'forge.group.paused');
    assert.match(node.description ?? '', /^paused: budget reached · \d\/2 done(?: · \d of 2 merged)? · spent [\d,]+ tokens of 1 tokens \(\d+ %\)$/);
    await vscode.commands.executeCommand('forge.openDashboard', { projectId: ref.projectId, groupId: 'thrift' });
    const probe = await waitFor('the Group part paused', async () => {
      const p = await api.dashboard().probe();
      return p.group?.id === 'thrift' && p.group.status === 'paused: budget reached' ? p : undefined;
    }, 30_000, 500);
    assert.match(probe.group!.budgetNote ?? '', /^Paused: the group budget is spent \(spent [\d,]+ tokens of 1 tokens/);
    assert.deepEqual(probe.group!.actions, ['Resume Group…', 'Cancel Group']);

    const refused = await vscode.commands.executeCommand<{ status: string; reason?: string; message?: string }>('forge.resumeGroup', { projectId: ref.projectId, id: 'thrift', budget: { tokens: 1 } });
    assert.equal(refused.status, 'refused');
    assert.equal(refused.reason, 'bad-group');
    assert.match(refused.message ?? '', /budget leaves no room/);
    assert.equal(engine.groups.get(ref)?.status, 'paused');

    // As a user: the pause notification's button, then the two budget boxes (a higher token budget).
    await requestWorkbench('notification', { contains: 'group budget reached', button: 'Resume Group…' });
    await requestWorkbench('quick-input', { expect: 'Group budget in money', value: '' });
    await requestWorkbench('quick-input', { expect: 'Group budget in tokens', value: '100000000' });
    const done = await waitFor('the resumed group to complete', () => {
      const g: FeatureGroupView | undefined = engine.groups.get(ref);
      return g && (g.status === 'completed' || g.status === 'failed' || g.status === 'cancelled') ? g : undefined;
    }, 300_000, 500);
    assert.equal(done.status, 'completed', JSON.stringify(done.features.map((f) => [f.id, f.status, f.error])));
    assert.equal(done.budget.tokens, 100000000);
    const finalPauses = api.notifications().filter((n) => n.message.includes('"thrift"') && /budget (reached|is spent)/.test(n.message));
    assert.equal(finalPauses.length, 1, 'no second pause notification');
  });
});

after(() => disposeForgeTestEnvironment());
