// The greeting plan and its script for the scripted model, shared by the plan-loop tests (the
// checkout's extension in the `workspace` run, the installed VSIX in the `vsix` run): the coder
// writes a misspelt greeting; the first audit records a bug on it; the coder fixes it, only
// once the test has seen the finding (releaseFix); the second audit resolves it; the final
// audit is clean.
import { join } from 'node:path';
import type { TreeSnapshotNode } from '../../../../src/vscode/api';
import { forgeAgentOf, text, toolCall, type ScriptedModel, type ScriptedRequest, type ScriptStep } from '../../../support/scripted-model';
import { calledTools } from '../forge-test-kit';

export const GREETING_PLAN = `# Greeting

Loop Name: greeting

## Objective
A script that greets the user.

## Write hello.js
Create \`hello.js\` that prints "hello" with console.log.
`;

export const GREETING_FINDING = 'Greeting is misspelt ("helo").';

/** The loop's worktree, as Forge's prompt names it to the agent. */
export function worktreeOf(request: ScriptedRequest): string {
  const first = request.messages.find((m) => m.role === 'user');
  const content = typeof first?.content === 'string' ? first.content : JSON.stringify(first?.content ?? '');
  const dir = /git worktree (\S+?) (?:on branch|\(branch)/.exec(content)?.[1];
  if (!dir) throw new Error('The scripted model found no worktree in the prompt.');
  return dir;
}

/** The Loop Explorer's node of the loop `name`, with the label of its group (Running / Recent). */
export function findLoop(tree: readonly TreeSnapshotNode[], name: string): { group: string; node: TreeSnapshotNode } | undefined {
  for (const group of tree) {
    const node = group.children.find((c) => c.label === name);
    if (node) return { group: group.label, node };
  }
  return undefined;
}

/** Scripts `model` for the greeting loop; the coder's fix waits for `releaseFix()`. */
export function scriptGreetingLoop(model: ScriptedModel): { releaseFix: () => void } {
  let releaseFix: () => void = () => {};
  const fixReleased = new Promise<void>((resolve) => (releaseFix = resolve));
  let audits = 0;
  model.setHandler(async (request): Promise<ScriptStep> => {
    const agent = forgeAgentOf(request);
    const called = calledTools(request);
    if (called.includes('forge_loop_handoff')) return text('Handed off.');
    if (agent === 'forge-code') {
      const worktree = worktreeOf(request);
      const fixing = /Greeting is misspelt/.test(JSON.stringify(request.messages));
      if (!called.includes('write')) {
        if (fixing) await fixReleased;
        return toolCall('write', { filePath: join(worktree, 'hello.js'), content: fixing ? "console.log('hello');\n" : "console.log('helo');\n" });
      }
      return toolCall('forge_loop_handoff', { decisions: fixing ? 'Fixed the spelling.' : 'Wrote hello.js.', verification: 'Read the file back.', notesForAuditor: '' });
    }
    if (agent === 'forge-auditor') {
      if (called.length === 0) audits++;
      if (audits === 1) {
        if (!called.includes('forge_review_write')) {
          return toolCall('forge_review_write', { file: 'hello.js', line: 1, severity: 'bug', description: GREETING_FINDING, scenario: 'node hello.js prints "helo"' });
        }
        return toolCall('forge_loop_handoff', { summary: 'hello.js misspells the greeting.', done: false });
      }
      if (audits === 2 && !called.includes('forge_review_delete')) {
        return toolCall('forge_review_delete', { file: 'hello.js', line: 1 });
      }
      return toolCall('forge_loop_handoff', { summary: audits === 2 ? 'The greeting is fixed.' : 'Final audit: the plan is implemented.', done: true });
    }
    return text('Nothing to do.');
  });
  return { releaseFix: () => releaseFix() };
}
