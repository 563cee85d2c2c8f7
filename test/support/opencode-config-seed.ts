/**
 * The first time opencode runs in a fresh home it installs `@opencode-ai/plugin` from the npm
 * registry into its global config folder, in the background, and holds its shutdown until that
 * install is done. Every test gets a fresh home (opencode-test-env.ts), so every test would
 * download the package again, and every stop would wait out Forge's grace period while the
 * download runs. A user's machine did that install once, long ago: so does the test suite. The
 * first real install's result is kept in `.cache/opencode-config-deps/<opencode version>/` and
 * copied into each new home's config folder; opencode then finds it complete and installs
 * nothing. Without the registry (or if the install fails) homes stay unseeded: tests still run,
 * only slower.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { resolveOpencodeBinary, startOpencodeProcess } from '../../src/core/opencode/server-process';

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/**
 * Where the kept installs live: `.cache/opencode-config-deps` of the checkout, or the folder
 * FORGE_TEST_OPENCODE_SEEDS names (the installed-VSIX runs, whose extension host cannot reach
 * the checkout, get a read-only copy there).
 */
const SEEDS_DIR = process.env.FORGE_TEST_OPENCODE_SEEDS || join(REPO_ROOT, '.cache', 'opencode-config-deps');
/** What opencode's install leaves in the config folder (and what marks it complete). */
const INSTALLED = ['package.json', 'package-lock.json', 'node_modules'] as const;
const INSTALL_TIMEOUT_MS = 180_000;

let seedDir: Promise<string | null> | undefined;

/** Copies the kept install into `configDir` (an opencode config folder); makes it once if needed. */
export async function seedOpencodeConfigDependencies(configDir: string): Promise<boolean> {
  seedDir ??= ensureSeed().catch((error: unknown) => {
    process.stderr.write(`[test env] opencode's plugin install could not be prepared (${String(error)}); each test's opencode will install it itself.\n`);
    return null;
  });
  const seed = await seedDir;
  if (!seed) return false;
  await cp(join(seed, 'package.json'), join(configDir, 'package.json'));
  await cp(join(seed, 'package-lock.json'), join(configDir, 'package-lock.json'));
  // 64 MB in ~3 600 files: linked, not copied (opencode only reads it once it is complete).
  await symlink(join(seed, 'node_modules'), join(configDir, 'node_modules'), 'dir');
  return true;
}

async function ensureSeed(): Promise<string> {
  const binary = resolveOpencodeBinary();
  const version = execFileSync(binary, ['--version']).toString().trim();
  const seed = join(SEEDS_DIR, version);
  if (complete(seed)) return seed;

  // A throw-away home, its config folder filled by opencode itself.
  const base = SEEDS_DIR;
  await mkdir(base, { recursive: true });
  const home = await mkdtemp(join(base, '.making-'));
  try {
    const env = { HOME: join(home, 'home'), XDG_CONFIG_HOME: join(home, 'config'), XDG_DATA_HOME: join(home, 'data'), XDG_CACHE_HOME: join(home, 'cache'), XDG_STATE_HOME: join(home, 'state') };
    for (const dir of Object.values(env)) await mkdir(dir, { recursive: true });
    const configDir = join(env.XDG_CONFIG_HOME, 'opencode');
    await mkdir(configDir, { recursive: true });
    await writeFile(join(configDir, 'opencode.json'), JSON.stringify({ $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'disabled' }));
    const cwd = join(home, 'project');
    await mkdir(cwd);
    const server = await startOpencodeProcess({ binaryPath: binary, cwd, baseEnv: { ...process.env, ...env } });
    try {
      const deadline = Date.now() + INSTALL_TIMEOUT_MS;
      while (!complete(configDir)) {
        if (Date.now() > deadline) throw new Error(`opencode did not finish installing its plugin package within ${INSTALL_TIMEOUT_MS / 1000} s`);
        await sleep(200);
      }
    } finally {
      await server.stop();
    }
    // Another test process may have made it meanwhile: the first rename wins, both are equal.
    const made = join(home, 'seed');
    await mkdir(made);
    for (const entry of INSTALLED) await rename(join(configDir, entry), join(made, entry));
    await rename(made, seed).catch((error: NodeJS.ErrnoException) => {
      if (!complete(seed)) throw error;
    });
    return seed;
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

function complete(dir: string): boolean {
  return INSTALLED.every((entry) => existsSync(join(dir, entry)));
}
