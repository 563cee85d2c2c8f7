// Onboarding: the walkthrough opens (screenshot saved as an artefact), Forge's keybindings
// collide with none of this VS Code build's default keybindings, and the chat registration
// guard keeps activation safe where the chat API is missing.
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { chatApiOf, registerForgeChat } from '../../../src/vscode/chat/forge-chat';
import { createForgeLog } from '../../../src/vscode/log';
import { forgeApi } from './forge-test-kit';
import { harnessInfo, requestPageText, requestScreenshot } from './support/harness';

interface Keybinding {
  key: string;
  command: string;
  mac?: string;
}

interface Manifest {
  contributes: {
    keybindings: Keybinding[];
    walkthroughs: { id: string; steps: { id: string; media: { markdown?: string }; completionEvents?: string[] }[] }[];
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const manifest = () => JSON.parse(readFileSync(join(harnessInfo().extensionPath, 'package.json'), 'utf8')) as Manifest;

/** The default keybindings of this VS Code build (the "Default Keyboard Shortcuts (JSON)" document), without comments. */
async function defaultKeybindings(): Promise<Keybinding[]> {
  await vscode.commands.executeCommand('workbench.action.openDefaultKeybindingsFile');
  for (let i = 0; i < 30 && !vscode.window.activeTextEditor?.document.uri.toString().includes('keybindings'); i++) await sleep(500);
  const document = vscode.window.activeTextEditor?.document;
  assert.ok(document, 'the default keybindings document opened');
  const json = document
    .getText()
    .split('\n')
    .filter((line) => !line.trim().startsWith('//'))
    .join('\n');
  await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
  return JSON.parse(json) as Keybinding[];
}

describe('Forge onboarding', () => {
  it('the walkthrough opens with its steps; a screenshot is saved under .test-artifacts/', async function () {
    this.timeout(120_000);
    await forgeApi();
    const walkthrough = manifest().contributes.walkthroughs[0]!;
    for (const step of walkthrough.steps) {
      assert.ok(step.media.markdown && existsSync(join(harnessInfo().extensionPath, step.media.markdown)), `step ${step.id} has its markdown`);
      assert.ok((step.completionEvents ?? []).length > 0, `step ${step.id} has completion events`);
    }
    // Without the side bar the walkthrough has room for its step's markdown next to the steps.
    await vscode.commands.executeCommand('workbench.action.closeSidebar');
    await vscode.commands.executeCommand('workbench.action.openWalkthrough', `${harnessInfo().extensionId}#${walkthrough.id}`, false);
    let text = '';
    for (let i = 0; i < 60 && !text.includes('Install or locate opencode'); i++) {
      await sleep(500);
      text = (await requestPageText('.gettingStartedContainer')).join('\n');
    }
    for (const title of ['Get started with Forge', 'Install or locate opencode', 'Choose a model', 'Add a provider API key (optional)', 'Turn the sandbox on', 'Draft or open a plan', 'Execute the plan', 'Read the findings']) {
      assert.ok(text.includes(title), `the walkthrough shows "${title}":\n${text}`);
    }
    const nls = JSON.parse(readFileSync(join(harnessInfo().extensionPath, 'package.nls.json'), 'utf8')) as Record<string, string>;
    assert.match(nls['walkthrough.gettingStarted.model.description'] ?? '', /scripted demo model: a fixed script .*not an AI/, 'the model step names the embedded model for what it is');
    await sleep(1500); // the step's markdown renders in a webview after the list
    const path = await requestScreenshot('walkthrough');
    assert.ok(existsSync(path));
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  });

  it('Forge\'s keybindings collide with no default keybinding of this VS Code build (nor prefix one)', async function () {
    this.timeout(60_000);
    const ours = manifest().contributes.keybindings;
    assert.deepEqual(ours.map((k) => k.command).sort(), ['forge.executePlan', 'forge.openDashboard']);
    const defaults = (await defaultKeybindings()).filter((k) => !k.command.replace(/^-/, '').startsWith('forge.'));
    assert.ok(defaults.length > 500, `read the default keybindings (${defaults.length})`);
    const chords = (key: string) => key.toLowerCase().split(' ');
    for (const binding of ours) {
      const [first] = chords(binding.key);
      const clashes = defaults.filter((d) => d.key && (d.key.toLowerCase() === binding.key.toLowerCase() || chords(d.key)[0] === first));
      assert.deepEqual(clashes.map((d) => `${d.key} → ${d.command}`), [], `${binding.key} (${binding.command}) collides with default keybindings`);
    }
    const registered = await vscode.commands.getCommands(true);
    assert.ok(registered.includes('forge.executePlan') && registered.includes('forge.openDashboard'));
  });

  it('registers @forge only where the chat API exists: without it, registration is skipped, not thrown', () => {
    assert.equal(chatApiOf({}), undefined);
    assert.equal(chatApiOf({ chat: {} }), undefined);
    assert.ok(chatApiOf({ chat: vscode.chat }), 'this build has the chat API');
    const lines: string[] = [];
    const channel = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m), error: (m: string) => lines.push(m), debug: () => {}, trace: () => {} };
    const deps = {
      log: createForgeLog(channel as unknown as vscode.LogOutputChannel),
      extensionUri: vscode.Uri.file(harnessInfo().extensionPath),
      loops: async () => [],
      executeCommand: <T>() => Promise.resolve(undefined as T),
      commandExists: async () => false,
      openPlan: () => undefined,
    };
    assert.equal(registerForgeChat(undefined, deps), undefined);
    assert.match(lines.join('\n'), /no chat API/);
    // A chat API that refuses participants (a build without the chat view) does not stop activation either.
    const refusing = { createChatParticipant: () => { throw new Error('chat is not available'); } };
    assert.equal(registerForgeChat(refusing, deps), undefined);
    assert.match(lines.join('\n'), /could not be registered: chat is not available/);
  });
});
