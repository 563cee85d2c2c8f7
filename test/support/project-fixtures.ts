/**
 * Real projects for the worktree setup tests (issue 27), with real packages:
 * - an npm project whose `npm test` runs uvu from the registry, with its package-lock.json; its
 *   node_modules is installed once into `.cache/test-fixtures/` (keyed by the manifest) WHEN
 *   MISSING, under CI=true too (the registry is reachable there), and copied into a test's checkout;
 * - a Python project tested with pytest from the system packages (scripts/prereqs/python-pytest.sh
 *   installs them when missing) in a `python3 -m venv --system-site-packages` virtualenv.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './loop-harness';

export const UVU_PACKAGE_JSON = `${JSON.stringify(
  { name: 'setup-fixture', version: '1.0.0', private: true, scripts: { test: 'uvu tests' }, devDependencies: { uvu: '0.5.6' } },
  null,
  2,
)}\n`;

/**
 * The fixture project's `tests/add.test.js`: uvu tests of `add.js` (adds) and of the ignored `.env`
 * that `.worktreeinclude` brings (`GREETING=hello`).
 */
const UVU_TEST = [
  "const { test } = require('uvu');",
  "const assert = require('uvu/assert');",
  "const fs = require('fs');",
  "const add = require('../add.js');",
  "test('adds', () => { assert.is(add(2, 3), 5); });",
  "test('reads .env', () => { assert.match(fs.readFileSync('.env', 'utf8'), /GREETING=hello/); });",
  'test.run();',
  '',
].join('\n');

export interface NpmFixture {
  packageJson: string;
  packageLock: string;
  /** The installed node_modules in the cache (copy it into a checkout, never change it). */
  nodeModules: string;
}

function run(cmd: string, args: string[], cwd: string): void {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 10 * 60_000, env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd} (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
}

/** The uvu project, installed from the registry into the cache when missing (also under CI=true). */
export function ensureUvuFixture(): NpmFixture {
  const key = createHash('sha256').update(UVU_PACKAGE_JSON).digest('hex').slice(0, 12);
  const dir = path.join(REPO_ROOT, '.cache', 'test-fixtures', `npm-uvu-${key}`);
  if (!existsSync(path.join(dir, 'node_modules', 'uvu', 'package.json')) || !existsSync(path.join(dir, 'package-lock.json'))) {
    const tmp = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
    mkdirSync(tmp, { recursive: true });
    try {
      writeFileSync(path.join(tmp, 'package.json'), UVU_PACKAGE_JSON);
      run('npm', ['install', '--no-audit', '--no-fund'], tmp);
      if (!existsSync(path.join(tmp, 'node_modules', 'uvu'))) throw new Error(`npm install did not install uvu into ${tmp}`);
      rmSync(dir, { recursive: true, force: true });
      renameSync(tmp, dir);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  return { packageJson: UVU_PACKAGE_JSON, packageLock: readFileSync(path.join(dir, 'package-lock.json'), 'utf8'), nodeModules: path.join(dir, 'node_modules') };
}

/** Copies the fixture's installed node_modules into `checkoutDir` (the user's install). */
export function installNodeModulesInto(fixture: NpmFixture, checkoutDir: string): void {
  cpSync(fixture.nodeModules, path.join(checkoutDir, 'node_modules'), { recursive: true, verbatimSymlinks: true });
}

/**
 * The npm fixture project's tracked files: its manifest and lockfile, an `add.js` that does not add
 * yet, the uvu test, a `.gitignore` of node_modules and `.env`, and a `.worktreeinclude` of `.env`.
 */
export function uvuProjectFiles(fixture: NpmFixture): Record<string, string> {
  return {
    'package.json': fixture.packageJson,
    'package-lock.json': fixture.packageLock,
    'add.js': 'module.exports = () => 0;\n',
    'tests/add.test.js': UVU_TEST,
    '.gitignore': 'node_modules/\n.env\n',
    '.worktreeinclude': '.env\n',
  };
}

/** What the user's checkout of that project holds beside its tracked files: node_modules installed, the ignored `.env`. */
export function prepareUvuCheckout(fixture: NpmFixture, checkoutDir: string): void {
  installNodeModulesInto(fixture, checkoutDir);
  writeFileSync(path.join(checkoutDir, '.env'), 'GREETING=hello\n');
}

/** Installs pytest (system packages) when missing; fails when it cannot. */
export function pythonPrereqs(): void {
  const r = spawnSync(path.join(REPO_ROOT, 'scripts', 'prereqs', 'python-pytest.sh'), [], { encoding: 'utf8', timeout: 15 * 60_000 });
  if (r.status !== 0) throw new Error(`scripts/prereqs/python-pytest.sh failed (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
}

/** A `/usr/bin/python3 -m venv --system-site-packages` environment (Debian's python, which the sandbox shows) in `dir` (pytest comes from the system). */
export function makeVenv(dir: string): void {
  run('/usr/bin/python3', ['-m', 'venv', '--system-site-packages', '--without-pip', dir], path.dirname(dir));
}

/**
 * A team's Node image for docker tests (issue 27 item 4): Forge's sandbox test image plus this
 * machine's own `node` and npm (no registry image is reachable here), tagged by the Node version
 * and built once per docker daemon. A project's `.devcontainer/Dockerfile` starts FROM it, as a
 * real project's starts FROM its team's toolchain image.
 */
export function ensureNodeToolchainImage(env: NodeJS.ProcessEnv, baseImage: string): string {
  const tag = `forge-test-node:${process.versions.node}`;
  if (spawnSync('docker', ['image', 'inspect', tag], { env, stdio: 'ignore' }).status === 0) return tag;
  // npm beside this node, where Node's installers put it (<prefix>/bin/node, <prefix>/lib/node_modules/npm).
  const npmDir = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm');
  if (!existsSync(path.join(npmDir, 'bin', 'npm-cli.js'))) throw new Error(`no npm at ${npmDir} to put into ${tag}`);
  const context = path.join(REPO_ROOT, '.cache', `node-image-${process.pid}-${randomBytes(3).toString('hex')}`);
  mkdirSync(context, { recursive: true });
  try {
    cpSync(process.execPath, path.join(context, 'node'));
    cpSync(npmDir, path.join(context, 'npm'), { recursive: true, verbatimSymlinks: true });
    writeFileSync(
      path.join(context, 'Dockerfile'),
      [
        `FROM ${baseImage}`,
        'USER root',
        'COPY node /usr/local/bin/node',
        'COPY npm /usr/local/lib/node_modules/npm',
        'RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && node --version && npm --version',
        'USER agent',
        '',
      ].join('\n'),
    );
    const r = spawnSync('docker', ['build', '-q', '-t', tag, context], { env, encoding: 'utf8', timeout: 10 * 60_000 });
    if (r.status !== 0) throw new Error(`docker build of ${tag} failed (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
    return tag;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}
