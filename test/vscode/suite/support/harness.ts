// What the harness that started this extension host tells the tests, and the
// requests a test can make to it (a screenshot of the workbench page).
// The harness passes one JSON environment variable, FORGE_VSCODE_HARNESS, to
// code-server; environment variables given to code-server reach the extension
// host, and so reach this module.

export const HARNESS_ENV = 'FORGE_VSCODE_HARNESS';

export interface HarnessInfo {
  /** Name of the run (configuration) this extension host belongs to: `main`, `untrusted`, … */
  run: string;
  /** `code-server` (test/vscode/run-host.mjs) or `electron` (test/vscode/run-electron.mjs). */
  host: 'code-server' | 'electron';
  /** Absolute path of the folder the harness opened as the workspace. */
  workspaceFolder: string;
  /** The `.code-workspace` file the folder was opened through (runs with `multiRoot`), else null/absent. */
  workspaceFile?: string | null;
  /** `publisher.name` of the extension under development. */
  extensionId: string;
  /** Absolute path of the extension under development (extensionDevelopmentPath). */
  extensionPath: string;
  /**
   * Runs of the installed VSIX (runs.mjs `installedVsix`): the extensions folder it was installed
   * into, the checkout's folders hidden from code-server, and the folder of the only opencode on
   * PATH (null: none).
   */
  installed?: { extensionsDir: string; hiddenPaths: string[]; opencodeBin: string | null };
  /** Whether the harness asked for a trusted workspace. */
  trusted: boolean;
  /** Names of the extra environment variables the harness was asked to pass to the extension host. */
  extraEnv: string[];
  /** Base URL of the harness's control server on 127.0.0.1, or null when the host has none (electron). */
  controlUrl: string | null;
}

export function harnessInfo(): HarnessInfo {
  const raw = process.env[HARNESS_ENV];
  if (!raw) {
    throw new Error(`${HARNESS_ENV} is not set: start the extension tests through test/vscode/run-host.mjs (or scripts/vscode-test.mjs), not directly.`);
  }
  const info = JSON.parse(raw) as HarnessInfo;
  for (const key of ['run', 'host', 'workspaceFolder', 'extensionId', 'extensionPath'] as const) {
    if (typeof info[key] !== 'string' || info[key] === '') throw new Error(`${HARNESS_ENV} has no "${key}": ${raw}`);
  }
  return info;
}

/**
 * Asks the harness to save a PNG screenshot of the whole workbench page (what a
 * user would see in the browser window) and returns the file's absolute path,
 * under `.test-artifacts/vscode/<run>/<name>.png`. Resolves once the file is written.
 */
export async function requestScreenshot(name: string): Promise<string> {
  const { controlUrl } = harnessInfo();
  if (!controlUrl) throw new Error('This extension host was not started by the code-server harness: it cannot take workbench screenshots.');
  const response = await fetch(`${controlUrl}/screenshot`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  const body = (await response.json()) as { path?: string; error?: string };
  if (!response.ok || !body.path) throw new Error(`The harness could not take the screenshot "${name}": ${body.error ?? response.statusText}`);
  return body.path;
}

export interface WorkbenchProblemCounts {
  /** The Problems status-bar item's accessible label, e.g. "Errors: 1200, Warnings: 800". */
  label: string;
  errors: number;
  warnings: number;
  infos: number;
}

/**
 * The problem counts the workbench shows (its Problems status-bar item): what reached the
 * workbench's marker service, unlike `vscode.languages.getDiagnostics()`, which reads the
 * extension host's own copy. Updates arrive asynchronously: poll for the expected counts.
 */
export async function requestWorkbenchProblems(): Promise<WorkbenchProblemCounts> {
  const { controlUrl } = harnessInfo();
  if (!controlUrl) throw new Error('This extension host was not started by the code-server harness: it cannot read the workbench.');
  const response = await fetch(`${controlUrl}/problems`, { method: 'POST' });
  const body = (await response.json()) as Partial<WorkbenchProblemCounts> & { error?: string };
  if (!response.ok || typeof body.label !== 'string') throw new Error(`The harness could not read the workbench's problem counts: ${body.error ?? response.statusText}`);
  return body as WorkbenchProblemCounts;
}

/**
 * Drives the first workbench window as a user does (test/vscode/workbench-driver.mjs):
 * `command` `{ title }` (the palette), `quick-input` `{ expect, pick | value }` (answers the quick
 * pick or input box showing `expect`), `notification` `{ contains, button? }` (waits for a toast,
 * clicks a button), `texts` `{ selector }` (the text of parts of the workbench), `comment-form`
 * `{ text, button }` (types into the comment form shown and clicks its button).
 */
export async function requestWorkbench<T = Record<string, unknown>>(what: 'command' | 'quick-input' | 'notification' | 'texts' | 'comment-form', body: Record<string, unknown>): Promise<T> {
  const { controlUrl } = harnessInfo();
  if (!controlUrl) throw new Error('This extension host was not started by the code-server harness: it cannot drive the workbench.');
  const response = await fetch(`${controlUrl}/workbench/${what}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const reply = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new Error(`The harness could not do "${what}" ${JSON.stringify(body)} in the workbench: ${reply.error ?? response.statusText}`);
  return reply;
}

/**
 * A request to the harness's second workbench window (same folder, its own extension host with
 * the extension under development): `open`, `view-rows` `{ title }`, `command` `{ title }`, `screenshot` `{ name }`,
 * `reload`, `frame-texts`, `close` (see `createSecondWindow` in test/vscode/run-host.mjs).
 */
export async function requestSecondWindow<T = Record<string, unknown>>(what: 'open' | 'view-rows' | 'command' | 'reload' | 'screenshot' | 'frame-texts' | 'close', body: Record<string, unknown> = {}): Promise<T> {
  const { controlUrl } = harnessInfo();
  if (!controlUrl) throw new Error('This extension host was not started by the code-server harness: it has no second window.');
  const response = await fetch(`${controlUrl}/second-window/${what}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const reply = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new Error(`The harness's second window could not do "${what}": ${reply.error ?? response.statusText}`);
  return reply;
}

/**
 * The text (innerText) of every element of the workbench page matching `selector` (default:
 * the whole page), for what the extension host's API cannot read, such as a chat answer.
 */
export async function requestPageText(selector?: string): Promise<string[]> {
  const { controlUrl } = harnessInfo();
  if (!controlUrl) throw new Error('This extension host was not started by the code-server harness: it cannot read the workbench page.');
  const response = await fetch(`${controlUrl}/page-text`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ selector }),
  });
  const body = (await response.json()) as { texts?: string[]; error?: string };
  if (!response.ok || !body.texts) throw new Error(`The harness could not read the page text: ${body.error ?? response.statusText}`);
  return body.texts;
}
