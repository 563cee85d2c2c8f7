#!/usr/bin/env node
// The `forge` command: runs the bundled CLI, built by `npm run build`.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/cli.mjs', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  process.stderr.write(`forge: ${fileURLToPath(cli)} is missing. Run "npm run build" in the Forge checkout first.\n`);
  process.exit(2);
}
await import(cli.href);
