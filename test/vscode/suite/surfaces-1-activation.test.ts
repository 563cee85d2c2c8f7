// Activation: every command the manifest contributes is registered, every forge.* command
// registered is in the manifest, and activating starts nothing (no engine, no process).
import * as assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { forgeApi } from './forge-test-kit';
import { harnessInfo } from './support/harness';

interface Manifest {
  activationEvents?: string[];
  contributes: {
    commands: { command: string; title: string; category?: string }[];
    menus: Record<string, { command: string; when?: string }[]>;
    views: Record<string, { id: string }[]>;
  };
}

/** Command lines of this process's children (Linux /proc). */
function childCommandLines(): string[] {
  const lines: string[] = [];
  for (const task of readdirSync(`/proc/${process.pid}/task`)) {
    let children = '';
    try {
      children = readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const pid of children.split(/\s+/).filter(Boolean)) {
      try {
        lines.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim());
      } catch {
        /* exited meanwhile */
      }
    }
  }
  return lines;
}

describe('Forge activation', () => {
  const manifest = JSON.parse(readFileSync(join(harnessInfo().extensionPath, 'package.json'), 'utf8')) as Manifest;
  const contributed = manifest.contributes.commands.map((c) => c.command);

  it('activates without starting the engine or any process', async () => {
    const api = await forgeApi();
    assert.equal(api.engine(), undefined, 'activation must not create the engine (no database is opened)');
    const opencode = childCommandLines().filter((cmd) => /opencode|forge\.db/.test(cmd));
    assert.deepEqual(opencode, [], 'no opencode process after activation');
    assert.ok(api.activationMs >= 0 && Number.isFinite(api.activationMs));
    assert.ok(manifest.activationEvents?.includes('onStartupFinished'));
  });

  it('registers every command the manifest contributes, all in category Forge', async () => {
    await forgeApi();
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = contributed.filter((c) => !registered.has(c));
    assert.deepEqual(missing, [], `contributed but not registered: ${missing.join(', ')}`);
    // Titles and categories are %keys% of package.nls.json (localisation).
    const nls = JSON.parse(readFileSync(join(harnessInfo().extensionPath, 'package.nls.json'), 'utf8')) as Record<string, string>;
    const text = (value: string | undefined) => (value && /^%.+%$/.test(value) ? nls[value.slice(1, -1)] : value);
    for (const c of manifest.contributes.commands) assert.equal(text(c.category), 'Forge', `${c.command} has no "Forge" category`);
  });

  it('lists every registered forge.* command in the manifest', async () => {
    await forgeApi();
    const generated = new Set(
      Object.values(manifest.contributes.views)
        .flat()
        .flatMap((v) => [`${v.id}.focus`, `${v.id}.resetViewLocation`, `${v.id}.toggleVisibility`, `${v.id}.removeView`, `${v.id}.open`]),
    );
    const registered = (await vscode.commands.getCommands(true)).filter((c) => c.startsWith('forge.') && !generated.has(c));
    const unlisted = registered.filter((c) => !contributed.includes(c));
    assert.deepEqual(unlisted, [], `registered but not in package.json: ${unlisted.join(', ')}`);
  });

  it('hides the agent-running commands from the palette of an untrusted workspace (when clauses)', () => {
    const palette = new Map(manifest.contributes.menus.commandPalette?.map((m) => [m.command, m.when ?? '']));
    for (const command of ['forge.executePlan', 'forge.executeGoal', 'forge.draftPlan', 'forge.continueDraft', 'forge.restartLoop', 'forge.forceRestartLoop', 'forge.buildSandboxImage']) {
      assert.match(palette.get(command) ?? '', /isWorkspaceTrusted/, `${command} needs an isWorkspaceTrusted when clause`);
    }
  });
});
