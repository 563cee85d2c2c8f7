// Headless runner over the Forge engine (see README "CLI").
process.stderr.write('forge: the CLI is not built yet\n');
process.exit(2);
