// The @forge chat participant in the real workbench: code-server with the chat features on
// (run "chat" of runs.mjs). VS Code's chat view sends nothing to any participant until some
// language model exists, so the run installs a test-only model stub (fixtures/lm-stub); Forge's
// answer must not come from it: the stub counts its calls and would answer STUB-MODEL-ANSWER.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { forgeApi } from '../../forge-test-kit';
import { requestPageText, requestScreenshot } from '../../support/harness';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(1000);
  }
}

const chatText = async () => (await requestPageText('.interactive-session')).join('\n');

describe('@forge chat participant in the chat view', () => {
  it('answers /status with the loops and buttons from Forge\'s engine, never from a VS Code language model', async function () {
    this.timeout(300_000);
    const api = await forgeApi();
    assert.equal(api.chatParticipantRegistered, true, 'this build has the chat API: @forge must be registered');
    const stub = vscode.extensions.getExtension<{ calls(): number }>('forge-test.lm-stub');
    assert.ok(stub, 'the test-only language model stub is installed in this run');
    const stubApi = stub.isActive ? stub.exports : await stub.activate();
    // The chat view must know a model before it dispatches a request at all.
    await until('the stub model', async () => ((await vscode.lm.selectChatModels({ vendor: 'forge-test-stub' })).length > 0 ? true : undefined));
    await vscode.commands.executeCommand('workbench.action.chat.open', { query: '', isPartialQuery: true, mode: 'ask' });
    await until('the chat view to offer the stub model', async () => ((await chatText()).includes('Forge test stub') ? true : undefined));

    await vscode.commands.executeCommand('workbench.action.chat.open', { query: '@forge /status', isPartialQuery: false, mode: 'ask' });
    const answer = await until('the answer of @forge /status', async () => {
      const text = await chatText();
      return /No Forge loops in this workspace yet|Forge loops: \d+ running/.test(text) || /Language model unavailable/.test(text) ? text : undefined;
    });
    await requestScreenshot('chat-forge-status');
    assert.doesNotMatch(answer, /Language model unavailable/, `the chat view did not dispatch to @forge:\n${answer}`);
    assert.match(answer, /No Forge loops in this workspace yet\. Open a markdown plan and run @forge \/run/, answer);
    assert.match(answer, /Open Dashboard/, 'the answer has the Open Dashboard button');
    assert.doesNotMatch(answer, /STUB-MODEL-ANSWER/);
    assert.equal(stubApi.calls(), 0, 'Forge must not use a VS Code language model');
  });

  it('answers /plan without Forge: Draft Plan by saying how to draft, and /run without an open plan by asking for one', async function () {
    this.timeout(180_000);
    const stub = vscode.extensions.getExtension<{ calls(): number }>('forge-test.lm-stub')!;
    const stubApi = stub.isActive ? stub.exports : await stub.activate();
    const hasDraft = (await vscode.commands.getCommands(true)).includes('forge.draftPlan');
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('workbench.action.chat.open', { query: '@forge /plan add a --version flag', isPartialQuery: false, mode: 'ask' });
    const planAnswer = await until('the answer of @forge /plan', async () => {
      const text = await chatText();
      return /Drafting a plan is not available in this build of Forge|Forge: Draft Plan is on it/.test(text) ? text : undefined;
    });
    if (hasDraft) assert.match(planAnswer, /Forge: Draft Plan is on it/);
    else assert.match(planAnswer, /Drafting a plan is not available in this build of Forge\. Write the plan yourself/);

    await vscode.commands.executeCommand('workbench.action.chat.open', { query: '@forge /run', isPartialQuery: false, mode: 'ask' });
    const runAnswer = await until('the answer of @forge /run', async () => {
      const text = await chatText();
      return /Open the plan \(a markdown file\) in the editor first/.test(text) ? text : undefined;
    });
    await requestScreenshot('chat-forge-plan-run');
    assert.match(runAnswer, /Open the plan \(a markdown file\) in the editor first, then ask @forge \/run again/);
    assert.equal(stubApi.calls(), 0, 'Forge must not use a VS Code language model');
  });
});
