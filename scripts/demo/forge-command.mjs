// How `npm run demo` tells the user to run Forge's CLI: `forge` when this checkout's own
// `forge` is the first one on PATH (after `npm link`), else `node …/dist/cli.mjs` and how to put
// it there. `npx forge` is never suggested: it fetches an unrelated npm package named forge.
import { existsSync, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** The first `forge` on `pathEnv` (a PATH value), as its real path; null when there is none. */
export function forgeOnPath(pathEnv) {
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'forge');
    if (existsSync(candidate)) {
      try {
        return realpathSync(candidate);
      } catch {
        return candidate;
      }
    }
  }
  return null;
}

/**
 * `{ command, hint }`: the command that runs this checkout's CLI, and null or the lines that say
 * how to type `forge` instead (npm link from the checkout).
 */
export function forgeCommand(root, pathEnv) {
  const own = realpathSync(join(root, 'bin', 'forge.js'));
  const found = forgeOnPath(pathEnv);
  if (found === own) return { command: 'forge', hint: null };
  const link = `(cd ${root} && npm link)`;
  const hint = [
    found === null
      ? `Forge demo: to type "forge" instead, put this checkout's forge on your PATH: ${link}`
      : `Forge demo: the "forge" first on your PATH (${found}) is not this checkout's; to use this one: ${link}, with npm's global bin folder (npm prefix -g)/bin before it on PATH`,
    'Forge demo: (npm link symlinks bin/forge.js into npm\'s global bin folder; "npm rm -g forge" removes it. Not "npx forge": that fetches an unrelated npm package named forge.)',
  ].join('\n');
  return { command: `node ${join(root, 'dist', 'cli.mjs')}`, hint };
}
