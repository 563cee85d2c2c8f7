// Provider API keys: kept in SecretStorage, never written to settings, the log or the database.
import * as assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, waitFor } from './forge-test-kit';

const SECRET = `sk-forge-test-${Math.random().toString(36).slice(2)}`;

describe('Set Provider API Key', function () {
  this.timeout(120_000);
  reportFailuresEarly();

  it('stores the key in the secret storage only: not in settings, the log or the database', async () => {
    const env = await forgeTestEnvironment();
    const api = await forgeApi();
    await api.startEngine();
    const result = await vscode.commands.executeCommand<{ status: string }>('forge.setApiKey', { env: 'FORGE_TEST_API_KEY', value: SECRET });
    assert.equal(result.status, 'done');
    assert.match(api.notifications().at(-1)?.message ?? '', /FORGE_TEST_API_KEY stored/);

    const settings = JSON.stringify(vscode.workspace.getConfiguration('forge'));
    assert.ok(!settings.includes(SECRET), 'not in the settings');
    // The log is written asynchronously: wait until it has the line about the key.
    const log = await waitFor('the log to record the key\'s name', () => {
      const file = join(api.logUri.fsPath, 'Forge.log');
      const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
      return /FORGE_TEST_API_KEY stored/.test(text) ? text : undefined;
    }, 30_000);
    assert.ok(!log.includes(SECRET), 'the log never has the value');
    const dbFiles = readdirSync(env.dataDir).filter((f) => f.startsWith('forge.db'));
    assert.ok(dbFiles.length > 0 && existsSync(join(env.dataDir, dbFiles[0]!)), 'the engine has its database');
    for (const f of dbFiles) assert.ok(!readFileSync(join(env.dataDir, f)).includes(SECRET), `${f} does not contain the key`);

    const removed = await vscode.commands.executeCommand<{ status: string }>('forge.setApiKey', { env: 'FORGE_TEST_API_KEY', value: '' });
    assert.equal(removed.status, 'cancelled', 'an empty key is not stored');
  });
});

after(() => disposeForgeTestEnvironment());
