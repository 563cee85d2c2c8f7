// Localisation of the extension: the manifest's %keys% all have English text, every
// user-facing string of src/vscode/ goes through vscode.l10n.t, and the English bundle
// (l10n/bundle.l10n.json, `npm run l10n`) is the one the sources give. The bypass check is
// shown to fail on planted bypasses, inline and in a real source file.
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildBundle, bundlePath, bundleText, extensionSources, extractMessages, findBypasses, manifestNlsKeys, repoRoot } from '../../../scripts/l10n';

const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const nls: Record<string, string> = JSON.parse(readFileSync(join(repoRoot, 'package.nls.json'), 'utf8'));

const bypassesOf = (text: string) => findBypasses({ path: 'fixture.ts', text }).map((p) => p.text);

describe('localisation', () => {
  it('package.nls.json has an English entry for every %key% of package.json, and no entry nothing uses', () => {
    const keys = manifestNlsKeys(manifest);
    assert.ok(keys.length > 60, `expected the manifest to name its texts by key, found ${keys.length} keys`);
    const missing = keys.filter((k) => !Object.hasOwn(nls, k));
    assert.deepEqual(missing, [], `package.json uses these %keys% without an entry in package.nls.json: ${missing.join(', ')}`);
    const unused = Object.keys(nls).filter((k) => !keys.includes(k));
    assert.deepEqual(unused, [], `package.nls.json entries no %key% of package.json uses: ${unused.join(', ')}`);
    for (const [k, text] of Object.entries(nls)) assert.ok(text.trim().length > 0, `package.nls.json "${k}" is empty`);
  });

  it('the manifest says every user-facing text by key (titles, descriptions, views, walkthrough)', () => {
    const c = manifest.contributes;
    const texts: unknown[] = [
      manifest.displayName,
      manifest.description,
      ...c.commands.flatMap((x: any) => [x.title, x.category]),
      ...c.viewsWelcome.map((x: any) => x.contents),
      ...Object.values(c.configuration.properties).map((x: any) => x.description),
      ...c.walkthroughs.flatMap((w: any) => [w.title, w.description, ...w.steps.flatMap((s: any) => [s.title, s.description])]),
      ...c.chatParticipants.flatMap((p: any) => [p.description, ...p.commands.map((x: any) => x.description)]),
    ];
    const literal = texts.filter((t) => typeof t !== 'string' || !/^%.+%$/.test(t));
    assert.deepEqual(literal, [], 'these manifest texts are not %keys% of package.nls.json');
  });

  it('no user-facing string literal in src/vscode/ or src/extension.ts bypasses vscode.l10n.t', () => {
    const files = extensionSources();
    assert.ok(files.length > 20 && files.some((f) => f.path.endsWith('status-bar.ts')), 'the check must see the extension sources');
    const bypasses = files.flatMap(findBypasses).map((p) => `${p.file}:${p.line}: ${p.why}: ${p.text}`);
    assert.deepEqual(bypasses, []);
  });

  it('every l10n.t message is a string literal, and l10n/bundle.l10n.json is up to date (npm run l10n)', () => {
    const { bundle, problems } = buildBundle(extensionSources());
    assert.deepEqual(problems.map((p) => `${p.file}:${p.line}: ${p.text}`), []);
    assert.ok(Object.keys(bundle).length > 150, 'the bundle holds the extension messages');
    assert.ok(existsSync(bundlePath), 'l10n/bundle.l10n.json is missing: run npm run l10n');
    assert.equal(readFileSync(bundlePath, 'utf8'), bundleText(bundle), 'l10n/bundle.l10n.json is stale: run npm run l10n');
    assert.equal(manifest.l10n, './l10n', 'package.json must point VS Code at the bundle folder ("l10n": "./l10n")');
  });

  describe('the bypass check fails on planted bypasses', () => {
    it('finds literals in messages, actions, quick picks, tree items, status-bar text, errors and chat answers', () => {
      const planted = [
        `vscode.window.showInformationMessage('Forge: loop done.', 'Open Dashboard');`,
        `vscode.window.showErrorMessage(\`Loop \${name} failed\`);`,
        `ctx.notifier.warn(vscode.l10n.t('Fine'), 'Show Log');`,
        `void vscode.window.showQuickPick([{ label: 'Pick me', description: vscode.l10n.t('ok') }], { title: 'Forge: Pick', placeHolder: 'Which loop?' });`,
        `const item = new vscode.TreeItem('A loop'); item.tooltip = cond ? vscode.l10n.t('x') : 'Hover text';`,
        `statusItem.text = '$(vm) Sandbox on';`,
        `throw new Error('Forge could not start the engine.');`,
        `stream.markdown('No loops here.');`,
        `const message = 'Forge: started the loop.'; void notifier.info(message);`,
        `function describe(): string { return 'a running loop'; } item.description = describe();`,
        `const parts: string[] = []; parts.push('two words'); item.label = parts.join(', ');`,
        `item.label = vscode.l10n.t('{0} of {1}', count, 'every loop');`,
      ];
      const found = bypassesOf(planted.join('\n'));
      for (const expected of [
        `'Forge: loop done.'`,
        `'Open Dashboard'`,
        '`Loop ${name} failed`',
        `'Show Log'`,
        `'Pick me'`,
        `'Forge: Pick'`,
        `'Which loop?'`,
        `'A loop'`,
        `'Hover text'`,
        `'$(vm) Sandbox on'`,
        `'Forge could not start the engine.'`,
        `'No loops here.'`,
        `'Forge: started the loop.'`,
        `'a running loop'`,
        `'two words'`,
        `'every loop'`,
      ]) {
        assert.ok(found.includes(expected), `planted bypass ${expected} not found; found: ${found.join(' | ')}`);
      }
      assert.equal(found.length, 16, `unexpected findings: ${found.join(' | ')}`);
    });

    it('accepts the same code with every text through vscode.l10n.t (no false alarm on ids, codicons or numbers)', () => {
      const fine = [
        `vscode.window.showInformationMessage(vscode.l10n.t('Forge: loop {0} done.', name), vscode.l10n.t('Open Dashboard'));`,
        `vscode.commands.executeCommand('workbench.action.openSettings', 'forge.model');`,
        `const item = new vscode.TreeItem(loop.name); item.contextValue = 'forge.loop.running'; item.iconPath = new vscode.ThemeIcon('sync~spin');`,
        `item.description = String(count); statusItem.text = '$(vm)';`,
        `log.info('engine started in 3 ms');`,
      ];
      assert.deepEqual(bypassesOf(fine.join('\n')), []);
    });

    it('finds a bypass planted in a real source file (status-bar.ts with one message un-localised)', () => {
      const file = extensionSources().find((f) => f.path.endsWith(join('vscode', 'status-bar.ts')))!;
      assert.deepEqual(findBypasses(file), []);
      const planted = file.text.replace("vscode.l10n.t('Show the Loop Explorer')", "'Show the Loop Explorer'");
      assert.notEqual(planted, file.text, 'the fixture edit must apply');
      const found = findBypasses({ ...file, text: planted });
      assert.equal(found.length, 1);
      assert.equal(found[0]!.text, "'Show the Loop Explorer'");
      assert.match(found[0]!.why, /tooltip/);
    });

    it('extraction refuses a message that is not a literal (it could not be translated)', () => {
      const { messages, problems } = extractMessages({ path: 'fixture.ts', text: "vscode.l10n.t('Fine {0}', x); vscode.l10n.t(`Loop ${name}`); vscode.l10n.t(message);" });
      assert.deepEqual(messages, ['Fine {0}']);
      assert.equal(problems.length, 2);
    });
  });
});
