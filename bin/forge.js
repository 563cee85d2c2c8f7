#!/usr/bin/env node
// The `forge` command: runs the bundled CLI, built by `npm run build`.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../dist/cli.cjs', import.meta.url));
if (!existsSync(cli)) {
  process.stderr.write(`forge: ${cli} is missing. Run "npm run build" in the Forge checkout first.\n`);
  process.exit(2);
}
createRequire(import.meta.url)(cli);
