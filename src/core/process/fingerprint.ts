import { createHash } from 'node:crypto';

/**
 * A fingerprint of what a process runs with (settings, environment, configuration): the SHA-256
 * of its canonical JSON — object keys sorted at every depth, undefined members left out — so
 * equal inputs compare equal whatever order their keys came in, and the secrets among them (API
 * keys, passwords) are compared without being kept or sent anywhere. Shared by the opencode
 * server pool (which loops may share a server) and the engine endpoint (which loops an engine
 * may take over).
 */
export function fingerprint(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(sortKeys(value))).digest('hex');
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value as object)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}
