// The sandbox status-bar item: its command flips forge.sandbox.enabled (the default for new
// loops) and the item follows; where no driver is available, turning it on is refused with
// the reason and the item shows it.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, waitFor } from './forge-test-kit';

const sandboxSetting = () => vscode.workspace.getConfiguration('forge').get<boolean>('sandbox.enabled');

describe('the sandbox status-bar toggle', function () {
  this.timeout(180_000);
  reportFailuresEarly();

  before(() => forgeTestEnvironment());
  after(() => vscode.workspace.getConfiguration('forge').update('sandbox.enabled', undefined, vscode.ConfigurationTarget.Global));

  it('shows the sandbox state from activation on, with the toggle as its command', async () => {
    const item = (await forgeApi()).statusBar().sandbox;
    assert.equal(item.command, 'forge.toggleSandbox');
    assert.match(item.text, /New loops: (sandboxed|unconfined \(sandbox (off|unavailable)\))/);
  });

  it('flips the sandbox default and the setting (or says why it cannot)', async () => {
    const api = await forgeApi();
    await vscode.workspace.getConfiguration('forge').update('sandbox.enabled', false, vscode.ConfigurationTarget.Global);
    await waitFor('the item to show off', () => /New loops: unconfined \(sandbox (off|unavailable)\)/.test(api.statusBar().sandbox.text));

    const turnOn = await vscode.commands.executeCommand<{ status: string; message?: string }>(api.statusBar().sandbox.command!);
    const availability = api.statusBar().sandbox.availability;
    assert.ok(availability, 'clicking the toggle probes the sandbox drivers');
    if (!availability.available) {
      assert.equal(turnOn.status, 'refused');
      assert.match(turnOn.message ?? '', /cannot sandbox loops on this machine/);
      assert.equal(sandboxSetting(), false, 'the setting is unchanged');
      assert.match(api.statusBar().sandbox.text, /unavailable/);
      assert.match(api.statusBar().sandbox.tooltip, new RegExp(availability.reason!.slice(0, 20).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
      return;
    }
    assert.equal(turnOn.status, 'done');
    assert.equal(sandboxSetting(), true);
    await waitFor('the item to show on', () => api.statusBar().sandbox.text.includes('New loops: sandboxed'));
    assert.ok(api.statusBar().sandbox.text.includes(availability.driver!), `the item names the driver: ${api.statusBar().sandbox.text}`);
    assert.equal(api.statusBar().sandbox.enabled, true);

    const turnOff = await vscode.commands.executeCommand<{ status: string }>(api.statusBar().sandbox.command!);
    assert.equal(turnOff.status, 'done');
    assert.equal(sandboxSetting(), false);
    await waitFor('the item to show off again', () => api.statusBar().sandbox.text.includes('New loops: unconfined (sandbox off)'));
    assert.equal(api.statusBar().sandbox.enabled, false);
  });
});

after(() => disposeForgeTestEnvironment());
