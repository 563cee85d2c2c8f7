// The auditor amends the plan mid-loop (plan_adjust), seen through the VS Code surfaces: the
// Loop Explorer's Sections detail badges the amended section (rationale in its tooltip), and
// the dashboard shows the amendment with its rationale, audit and before/after diff
// (screenshot saved).
import * as assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { TreeSnapshotNode } from '../../../../../src/vscode/api';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { requestScreenshot } from '../../support/harness';

const LOOP = 'amended-plan';
const RATIONALE = 'The farewell must end with a newline, or the test cannot compare it.';
const PLAN = `# Amended

Loop Name: ${LOOP}

## Write hello.txt
Write hello.txt saying hello.

## Write bye.txt
Write bye.txt saying bye.
`;

describe('a plan amended by the auditor, through the VS Code surfaces (scripted model)', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  let projectId: string;

  before(async () => {
    const env = await forgeTestEnvironment();
    let sectionAudits = 0;
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        if (!called.includes('write')) {
          const worktree = /git worktree (\S+?) (?:on branch|\(branch)/.exec(JSON.stringify(request.messages))?.[1] ?? '';
          return toolCall('write', { filePath: join(worktree, `pass-${Date.now()}.txt`), content: 'done\n' });
        }
        return toolCall('forge_loop_handoff', { decisions: 'Wrote the file.', verification: 'Read it back.', notesForAuditor: '' });
      }
      if (agent === 'forge-auditor') {
        if (called.length === 0) sectionAudits++;
        // During the first section's audit: amend the pending section, then hand off.
        if (sectionAudits === 1 && !called.includes('forge_plan_adjust')) {
          return toolCall('forge_plan_adjust', {
            rationale: RATIONALE,
            sections: [{ title: 'Write bye.txt', body: 'Write bye.txt saying bye.\nEnd the file with a newline.' }],
          });
        }
        return toolCall('forge_loop_handoff', { summary: 'Section done.', done: true });
      }
      return text('Nothing to do.');
    });
  });

  after(async () => {
    // Leave the workspace as the next test file expects it: the loop's worktree folder goes
    // when its worktree does (Forge takes removed worktrees out of the workspace).
    const worktreeDir = projectId ? (await forgeApi()).engine()?.repos.loops.get(projectId, LOOP)?.worktreeDir : undefined;
    if (worktreeDir) {
      await rm(worktreeDir, { recursive: true, force: true });
      await waitFor('the amended loop\'s worktree folder to leave the workspace', () => !vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === worktreeDir), 60_000);
    }
    await disposeForgeTestEnvironment();
  });

  it('runs to completion with the amendment stored', async () => {
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', {
      planText: PLAN,
      mode: 'loop',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      maxIterations: 8,
    });
    assert.equal(result.status, 'started', JSON.stringify(result));
    projectId = result.loop!.projectId;
    const api = await forgeApi();
    const row = await waitFor('the loop to end', () => {
      const r = api.engine()!.repos.loops.get(projectId, LOOP);
      return r && r.status !== 'running' && r.status !== 'starting' ? r : undefined;
    }, 400_000);
    assert.equal(row.status, 'completed', `${row.status} (${row.terminationReason})`);
    const amendments = api.engine()!.repos.planAmendments.listByLoop(projectId, LOOP);
    assert.equal(amendments.length, 1);
    assert.equal(amendments[0]!.rationale, RATIONALE);
  });

  it('the Loop Explorer lists the sections, the amended one with its badge and the rationale', async () => {
    const api = await forgeApi();
    const loop = api.treeSnapshot().flatMap((g) => g.children).find((n) => n.label === LOOP)!;
    const sections = loop.children.find((d) => d.label === 'Sections') as TreeSnapshotNode;
    assert.ok(sections, `a Sections detail among ${loop.children.map((c) => c.label).join(', ')}`);
    assert.deepEqual(sections.children.map((c) => `${c.label}=${c.description}`), ['1. Write hello.txt=done', '2. Write bye.txt=done · amended']);
    assert.match(sections.children[1]!.tooltip ?? '', /Amended by the auditor:\n- The farewell must end with a newline/);
  });

  it('the dashboard shows the amendment: rationale, audit, and the section\'s diff; screenshot saved', async () => {
    const api = await forgeApi();
    await vscode.commands.executeCommand('forge.openDashboard', { projectId, name: LOOP });
    const probe = await waitFor('the dashboard to render the amendment', async () => {
      const p = await api.dashboard().probe();
      return p.selectedLoop === LOOP && p.amendments > 0 ? p : undefined;
    }, 60_000);
    assert.equal(probe.amendments, 1);
    assert.equal(probe.amendedSections, 1);
    assert.deepEqual(probe.amendmentDiffLines, { added: 1, removed: 0 });
    const state = api.dashboard().state!;
    const amendment = state.detail!.amendments[0]!;
    assert.equal(amendment.rationale, RATIONALE);
    assert.equal(amendment.auditedSection, 0);
    assert.deepEqual(amendment.changes.map((c) => c.summary), ['section 2 "Write bye.txt" revised (+1 −0 lines)']);
    await requestScreenshot('dashboard-plan-amendment');
  });
});
