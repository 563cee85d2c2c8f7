/**
 * docs/settings.md, the reference of Forge's settings, written from the same schema as the
 * manifest (`npm run sync-manifest` writes both; test/core/config/settings.test.ts checks the
 * file is current). Pure.
 */
import { manifestSchemaFor, settingDescriptors } from './settings';

function cell(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();
}

/** What values a setting takes, from its JSON schema: `integer ≥ 0`, `"a" \| "b"`, `array of string`. */
export function describeSchema(schema: Record<string, unknown>): string {
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Array<Record<string, unknown>>).map(describeSchema).join(' or ');
  const type = String(schema.type ?? 'any');
  if (type === 'array') return `array of ${describeSchema((schema.items as Record<string, unknown> | undefined) ?? {})}`;
  const bounds = [
    typeof schema.minimum === 'number' ? `≥ ${schema.minimum}` : null,
    typeof schema.exclusiveMinimum === 'number' ? `> ${schema.exclusiveMinimum}` : null,
    typeof schema.maximum === 'number' ? `≤ ${schema.maximum}` : null,
  ].filter((b) => b !== null);
  return [type, ...bounds].join(' ');
}

export function settingsReference(): string {
  const rows = settingDescriptors.map((d) => {
    const schema = manifestSchemaFor(d.key);
    return `| \`${d.key}\` | ${cell(describeSchema(schema))} | \`${cell(JSON.stringify(d.default))}\` | ${cell(d.description)} |`;
  });
  return [
    '# Settings',
    '',
    "Part of [Forge's documentation](../README.md#where-to-go-next).",
    '',
    '<!-- Generated from src/core/config/settings.ts by `npm run sync-manifest`; do not edit by hand. -->',
    '',
    'VS Code reads them from its settings (*Preferences: Open Settings*, "Forge"); the `forge` CLI from',
    '`FORGE_SETTINGS`, a JSON object of the same keys (`FORGE_SETTINGS=\'{"forge.loop.maxIterations": 5}\'`),',
    'validated the same way: a bad value is reported and its default used, an unknown key is reported with',
    'the nearest setting.',
    '',
    '| Setting | Values | Default | What it does |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}
