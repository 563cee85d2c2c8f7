// Issue 26 in the real workbench, VS Code's git extension on: a hostile scripted coder in a
// sandboxed loop copies the repository's git dir into the worktree with core.fsmonitor and
// hooks, rewrites `.git` through opencode's `write` tool and makes an embedded repository
// whose own config sets core.fsmonitor; each program writes a marker outside the workspace
// (opencode's write into `.git` is refused by Forge's permission answer).
// After the loop Forge has undone all of it, so Open Worktree adds the folder and VS Code's git
// runs there without any marker appearing. Then the worktree is tampered with again (as an
// agent could after the loop's last commit): Open Worktree refuses, saying why, and adds nothing.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { confinementOf } from '../../../../../src/core/sandbox/confinement';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { harnessInfo } from '../../support/harness';

const PLAN = `# Hostile git
Loop Name: hostile-git-window

## Note
Create note.txt containing "note".

## Verification
note.txt exists.
`;

describe('a worktree a hostile agent tampered with, opened in VS Code (issue 26)', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  const outside = mkdtempSync(join(tmpdir(), 'forge-hostile-git-outside-'));
  const planFile = join(harnessInfo().workspaceFolder, 'hostile-git-plan.md');
  let ref: { projectId: string; name: string } | undefined;
  const markerScript = (name: string) => `printf '#!/bin/sh\\ntouch %s\\nexit 0\\n' "$(printf %s '${join(outside, name).slice(0, 8)}' '${join(outside, name).slice(8)}')"`;

  before(async () => {
    const env = await forgeTestEnvironment();
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        const bashCalls = called.filter((c) => c === 'bash').length;
        if (bashCalls === 0) {
          const command = [
            'cp -r "$(git rev-parse --git-common-dir)" .gg && rm -rf .gg/worktrees',
            `${markerScript('fsmonitor')} > .gg/fsm.sh`,
            `${markerScript('post-commit')} > .gg/hooks/post-commit`,
            'chmod +x .gg/fsm.sh .gg/hooks/post-commit',
            'git config -f .gg/config core.fsmonitor "$PWD/.gg/fsm.sh"',
            'git init -q sub',
            `${markerScript('sub-fsmonitor')} > sub/fsm.sh && chmod +x sub/fsm.sh`,
            'git -C sub config core.fsmonitor "$PWD/sub/fsm.sh"',
            'echo inner > sub/inner.txt && git -C sub add inner.txt && git -C sub -c user.email=a@b -c user.name=a -c core.fsmonitor=false commit -q -m inner',
            'echo note > note.txt',
          ].join(' && ');
          return toolCall('bash', { command, description: 'prepare' });
        }
        if (!called.includes('write')) {
          const worktree = (await forgeApi()).engine()!.runtime.get(ref!)!.worktreeDir!;
          return toolCall('write', { filePath: join(worktree, '.git'), content: `gitdir: ${worktree}/.gg\n` });
        }
        return toolCall('forge_loop_handoff', { decisions: 'Wrote note.txt.', verification: 'Read it back.', notesForAuditor: '' });
      }
      if (agent === 'forge-auditor') return toolCall('forge_loop_handoff', { summary: 'Fine.', done: true });
      return text('Nothing to do.');
    });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
    await writeFile(planFile, PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  });

  after(async () => {
    rmSync(planFile, { force: true });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    await disposeForgeTestEnvironment();
    rmSync(outside, { recursive: true, force: true });
  });

  it('after the loop the worktree is safe: it opens, VS Code\'s git runs there, and nothing of the agent\'s runs', async () => {
    const git = vscode.extensions.getExtension('vscode.git');
    assert.ok(git, 'VS Code\'s git extension is there');
    await git.activate();
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', {
      mode: 'loop',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      maxIterations: 4,
      sandbox: true,
    });
    assert.equal(result.status, 'started', JSON.stringify(result));
    ref = result.loop!;
    const api = await forgeApi();
    await waitFor('the loop to end', () => ['completed', 'failed', 'cancelled'].includes(api.engine()!.runtime.get(ref!)!.status), 300_000, 500);
    const row = api.engine()!.runtime.get(ref)!;
    assert.equal(row.status, 'completed');
    const worktree = row.worktreeDir!;
    assert.deepEqual(confinementOf(row), { sandboxed: true, driver: 'bwrap' });
    // The agent's work happened: its git dir copy with the fsmonitor program, and the embedded repository's file.
    assert.ok(existsSync(join(worktree, '.gg', 'fsm.sh')), 'the agent\'s copied git dir is there');
    const tree = execFileSync('git', ['ls-tree', '-r', row.branch!], { cwd: harnessInfo().workspaceFolder, encoding: 'utf8' });
    assert.match(tree, /^100644 blob \w+\tsub\/inner\.txt$/m, tree);
    assert.doesNotMatch(tree, /^160000 /m, `the branch holds a gitlink:\n${tree}`);
    const findings = api.engine()!.repos.reviewFindings.listByLoop(ref.projectId, ref.name).map((f) => `${f.file}: ${f.description}`);
    assert.ok(findings.some((f) => /^sub: .*repository at sub\//.test(f)), findings.join('\n'));
    assert.equal(existsSync(join(worktree, 'sub', '.git')), false, 'the embedded repository was removed');
    assert.deepEqual(readdirSync(outside), [], 'a program of the agent\'s ran during the loop');

    const opened = await vscode.commands.executeCommand<{ status: string }>('forge.openWorktree', ref);
    assert.equal(opened.status, 'done', JSON.stringify(opened));
    assert.ok(vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === worktree), 'the worktree was added');
    // VS Code's git opens the worktree's repository and reads its status.
    const gitApi = git.exports.getAPI(1);
    await waitFor('VS Code\'s git to open the worktree', () => gitApi.repositories.some((r: { rootUri: vscode.Uri }) => r.rootUri.fsPath === worktree), 60_000, 300);
    const repo = gitApi.repositories.find((r: { rootUri: vscode.Uri }) => r.rootUri.fsPath === worktree);
    await repo.status();
    await new Promise((r) => setTimeout(r, 3000));
    assert.deepEqual(readdirSync(outside), [], 'VS Code\'s git ran a program of the agent\'s');
    const index = vscode.workspace.workspaceFolders!.find((f) => f.uri.fsPath === worktree)!.index;
    vscode.workspace.updateWorkspaceFolders(index, 1);
    await waitFor('the worktree folder to leave', () => !vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === worktree), 30_000, 200);
    await waitFor('VS Code\'s git to close the worktree\'s repository', () => !gitApi.repositories.some((r: { rootUri: vscode.Uri }) => r.rootUri.fsPath === worktree), 60_000, 300);
  });

  it('a worktree tampered with after the loop\'s last commit: Open Worktree refuses, says why, and adds nothing', async () => {
    const api = await forgeApi();
    const worktree = api.engine()!.runtime.get(ref!)!.worktreeDir!;
    execFileSync('git', ['init', '-q', join(worktree, 'later')]);
    execFileSync('git', ['-C', join(worktree, 'later'), 'config', 'core.fsmonitor', join(worktree, '.gg', 'fsm.sh')]);
    writeFileSync(join(worktree, '.git'), `gitdir: ${worktree}/.gg\n`);
    const opened = await vscode.commands.executeCommand<{ status: string; message?: string }>('forge.openWorktree', ref);
    assert.notEqual(opened.status, 'done', JSON.stringify(opened));
    assert.match(opened.message ?? '', /Forge will not open .*\.git file was rewritten.*repository at later\//, JSON.stringify(opened));
    assert.ok(!vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === worktree), 'the worktree was added anyway');
    await new Promise((r) => setTimeout(r, 2000));
    assert.deepEqual(readdirSync(outside), [], 'a program of the agent\'s ran');
  });
});

function writeFile(file: string, content: string): Promise<void> {
  writeFileSync(file, content);
  return Promise.resolve();
}
