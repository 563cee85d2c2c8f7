// Regenerates package.json `contributes.configuration` from the zod settings schema, and the
// settings' English descriptions in package.nls.json: the manifest names each description by
// its key (`%config.forge.model.description%`), package.nls.json holds the text
// (run: npm run sync-manifest). It also writes docs/settings.md, the settings' reference.
// test/core/config and test/core/l10n check they agree.
import { readFileSync, writeFileSync } from 'node:fs';
import { manifestSchemaFor, settingDescriptors } from '../src/core/config/settings';
import { settingDescriptionNlsKey } from '../src/core/config/manifest-nls';
import { settingsReference } from '../src/core/config/settings-reference';

const manifestPath = new URL('../package.json', import.meta.url);
const nlsPath = new URL('../package.nls.json', import.meta.url);
const pkg = JSON.parse(readFileSync(manifestPath, 'utf8'));
const nls = JSON.parse(readFileSync(nlsPath, 'utf8')) as Record<string, string>;
// Descriptions of settings that no longer exist leave package.nls.json with them.
for (const key of Object.keys(nls)) if (/^config\.forge\..*\.description$/.test(key)) delete nls[key];
const properties: Record<string, unknown> = {};
settingDescriptors.forEach((d, order) => {
  const schema = manifestSchemaFor(d.key);
  nls[settingDescriptionNlsKey(d.key)] = String(schema.description);
  properties[d.key] = { ...schema, description: `%${settingDescriptionNlsKey(d.key)}%`, order };
});
pkg.contributes.configuration = { title: pkg.contributes.configuration?.title ?? 'Forge', properties };
writeFileSync(manifestPath, JSON.stringify(pkg, null, 2) + '\n');
writeFileSync(nlsPath, JSON.stringify(nls, null, 2) + '\n');
writeFileSync(new URL('../docs/settings.md', import.meta.url), settingsReference());
