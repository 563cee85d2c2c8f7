// Settings go through one validated accessor: a bad value is reported once, with the key,
// the value and what is allowed, and the default is used instead.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, waitFor } from './forge-test-kit';

describe('Forge settings', function () {
  this.timeout(120_000);
  reportFailuresEarly();
  const config = () => vscode.workspace.getConfiguration('forge');

  after(async () => {
    await config().update('loop.maxIterations', undefined, vscode.ConfigurationTarget.Global);
    await config().update('sandbox.network', undefined, vscode.ConfigurationTarget.Global);
  });

  it('reports an invalid value once with its key, value and what is allowed', async () => {
    await forgeTestEnvironment();
    const api = await forgeApi();
    await api.startEngine();
    const reports = () => api.notifications().filter((n) => n.message.includes('"forge.loop.maxIterations"'));
    const before = reports().length;
    await config().update('loop.maxIterations', -5, vscode.ConfigurationTarget.Global);
    const report = await waitFor('the report of the bad value', () => (reports().length > before ? reports().at(-1) : undefined), 30_000);
    assert.equal(report.level, 'warning');
    assert.match(report.message, /invalid value -5/);
    assert.match(report.message, />=\s*0|at least 0|too small/i);
    assert.match(report.message, /Using the default 15/);
    // Another forge.* change re-validates, but the same bad value is not reported again.
    await config().update('sandbox.network', true, vscode.ConfigurationTarget.Global);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(reports().length, before + 1);
  });
});

after(() => disposeForgeTestEnvironment());
