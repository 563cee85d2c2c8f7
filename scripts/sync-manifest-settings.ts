// Regenerates package.json `contributes.configuration` from the zod settings schema
// (run: npx tsx scripts/sync-manifest-settings.ts). test/core/config checks they agree.
import { readFileSync, writeFileSync } from 'node:fs';
import { manifestSchemaFor, settingDescriptors } from '../src/core/config/settings';

const path = new URL('../package.json', import.meta.url);
const pkg = JSON.parse(readFileSync(path, 'utf8'));
const properties: Record<string, unknown> = {};
settingDescriptors.forEach((d, order) => {
  properties[d.key] = { ...manifestSchemaFor(d.key), order };
});
pkg.contributes.configuration = { title: 'Forge', properties };
writeFileSync(path, JSON.stringify(pkg, null, 2) + '\n');
