/**
 * The setup phase of a loop (issue 27): before its first coder session, the worktree gets the
 * files of `.worktreeinclude`, its dependency folders (mounted, see worktree-setup.ts) and the
 * installs and setup commands of its plan, run in a short-lived sandbox of their own with the
 * network on and Forge's package cache writable (or, for an unconfined loop, on the host with the
 * agent shell's environment scrubbing). The coder never starts on a worktree whose setup failed.
 */
import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { CheckExecutor } from '../checks';
import type { ForgeSettings } from '../config/settings';
import { shellQuote } from '../sandbox/process';
import type { ForgeRepositories, LoopRow } from '../storage/repositories';
import { createGitRunner } from '../workspace/git-runner';
import { copyIncludedFiles, listIncludedFiles } from '../workspace/worktree-setup/setup-files';
import { describeSetupFailure, packageCacheEnv } from '../workspace/worktree-setup/setup-plan';
import {
  makeMountPoints,
  planWorktreeSetup,
  setupHasWork,
  WORKTREE_SETUP_STATE_KEY,
  type WorktreeSetupState,
} from '../workspace/worktree-setup/worktree-setup';
import type { LoopRef, LoopRuntimeEvent } from './runtime-types';
import type { EngineLog, ScratchCheckRun } from './supervisor-deps';

export interface SetupStep {
  /** `copy 2 files of .worktreeinclude`, `install node_modules (npm ci; …)`, `setup: make dev`. */
  step: string;
  status: 'started' | 'passed' | 'failed';
  durationMs?: number;
  /** The command's output (its tail), once it ended. */
  output?: string;
}

export interface SetupRunDeps {
  worktreeDir: string;
  /** Forge's package cache (npm, pip, uv… caches), writable during setup. */
  cacheDir: string;
  /** The whole setup's time limit (forge.worktree.setupTimeoutMs). */
  timeoutMs: number;
  /** Where the commands run: the setup sandbox, or the host for an unconfined loop. */
  exec: CheckExecutor;
  /** For messages: "the bwrap sandbox", "the host". */
  where: string;
  /** The loop runs sandboxed: dependency folders are mounted (else linked). */
  sandboxed: boolean;
  /** git in the user's checkout (for .worktreeinclude). */
  git(cwd: string, args: string[]): Promise<string>;
  onStep(step: SetupStep): void;
  /** Each line a setup command prints, as it comes (the last one when the command ends). */
  onOutputLine?(step: string, line: string): void;
  signal?: AbortSignal;
  now?: () => number;
}

/** Output kept per setup command (its tail). */
const SETUP_OUTPUT_BYTES = 16 * 1024;

/** Runs the setup; returns the state to store (status `done`, or `failed` with the message). */
export async function runLoopSetup(state: WorktreeSetupState, deps: SetupRunDeps): Promise<WorktreeSetupState> {
  const now = deps.now ?? Date.now;
  const started = now();
  const next: WorktreeSetupState = { ...state, status: 'pending' };
  const fail = (message: string): WorktreeSetupState => ({ ...next, status: 'failed', message, durationMs: now() - started });
  // 1. Ignored files the repository asks for.
  if (state.includePatterns.trim() !== '') {
    const t0 = now();
    const files = await listIncludedFiles({ git: deps.git }, state.checkoutDir, state.includePatterns);
    const step = `copy ${files.length} ignored file${files.length === 1 ? '' : 's'} of .worktreeinclude`;
    deps.onStep({ step, status: 'started' });
    const { copied, skipped } = await copyIncludedFiles(state.checkoutDir, deps.worktreeDir, files);
    next.copied = copied;
    deps.onStep({ step, status: 'passed', durationMs: now() - t0, ...(skipped.length ? { output: `not copied (not a regular file, or behind a link): ${skipped.join(', ')}` } : {}) });
  }
  // 2. Dependency folders: mount points (the sandboxes mount them); unconfined, the installs fill the worktree's.
  if (state.folders.length > 0 && deps.sandboxed) {
    const t0 = now();
    const step = `dependencies: ${state.folders.map((f) => `${f.folder} (${f.mode === 'reuse' ? 'your checkout\'s, read-only' : 'installed'})`).join(', ')}`;
    deps.onStep({ step, status: 'started' });
    try {
      await makeMountPoints(state, deps.worktreeDir);
    } catch (error) {
      deps.onStep({ step, status: 'failed', durationMs: now() - t0 });
      return fail(`${step} could not be prepared: ${(error as Error).message}`);
    }
    deps.onStep({ step, status: 'passed', durationMs: now() - t0 });
  }
  // 3. Installs and setup commands, in order, within the setup's time limit.
  await mkdir(deps.cacheDir, { recursive: true });
  const exports = Object.entries(packageCacheEnv(deps.cacheDir))
    .map(([k, v]) => `export ${k}=${shellQuote(v)}`)
    .join('; ');
  for (const command of state.commands) {
    const t0 = now();
    const left = deps.timeoutMs - (t0 - started);
    if (left <= 0) return fail(describeSetupFailure(command, { exitCode: null, timedOut: true, output: '' }, deps.where));
    deps.onStep({ step: command.label, status: 'started' });
    const cwd = command.dir === '' ? deps.worktreeDir : `${deps.worktreeDir}/${command.dir}`;
    const lines = deps.onOutputLine ? outputLines((line) => deps.onOutputLine!(command.label, line)) : undefined;
    const outcome = await deps.exec({
      command: `${exports}; ${command.command}`,
      cwd,
      timeoutMs: left,
      maxOutputBytes: SETUP_OUTPUT_BYTES,
      ...(deps.signal ? { signal: deps.signal } : {}),
      ...(lines ? { onOutput: lines.push } : {}),
    });
    lines?.end();
    const output = outcome.outputTail;
    const passed = outcome.exitCode === 0 && !outcome.timedOut && !outcome.cancelled;
    deps.onStep({ step: command.label, status: passed ? 'passed' : 'failed', durationMs: now() - t0, output });
    if (outcome.cancelled) return fail(`${command.label} was cancelled`);
    if (!passed) return fail(describeSetupFailure(command, { exitCode: outcome.exitCode, timedOut: outcome.timedOut, output }, deps.where));
  }
  const { message: _dropped, ...rest } = next;
  return { ...rest, status: 'done', durationMs: now() - started };
}

/** Splits streamed output into lines (a `\r` progress redraw ends a line too); `end` gives the rest. */
export function outputLines(onLine: (line: string) => void): { push: (text: string) => void; end: () => void } {
  let pending = '';
  return {
    push: (text) => {
      pending += text;
      const parts = pending.split(/\r\n|\n|\r/);
      pending = parts.pop() ?? '';
      for (const p of parts) if (p.trim() !== '') onLine(p);
    },
    end: () => {
      if (pending.trim() !== '') onLine(pending);
      pending = '';
    },
  };
}

/** A loop's stored setup, or undefined (a loop from before setups, or nothing to do). */
export function readSetupState(loop: Pick<LoopRow, 'state'>): WorktreeSetupState | undefined {
  const s = loop.state[WORKTREE_SETUP_STATE_KEY] as WorktreeSetupState | undefined;
  return s && typeof s === 'object' && Array.isArray(s.folders) ? s : undefined;
}

/** `<dataDir>/worktree-deps/<loop>`: the loop's installed dependency folders (never in the worktree). */
export function loopDepsDir(dataDir: string, loopName: string): string {
  return path.join(dataDir, 'worktree-deps', loopName);
}

/** `<dataDir>/package-cache`: the package managers' caches, shared by every loop's setup. */
export function packageCacheDir(dataDir: string): string {
  return path.join(dataDir, 'package-cache');
}

/**
 * Plans a new loop's setup (runtime start): stored in its state; a sandboxed loop's mount points
 * are made now, before its sandbox is created over the worktree. Null: nothing to do.
 */
export async function planLoopSetup(input: { dataDir: string; loop: LoopRow; settings: ForgeSettings; sandboxed: boolean }): Promise<WorktreeSetupState | null> {
  const { loop, settings } = input;
  if (!loop.repoDir || !loop.baseCommit || !loop.worktreeDir) return null;
  const plan = await planWorktreeSetup({
    git: createGitRunner(),
    checkoutDir: loop.repoDir,
    baseCommit: loop.baseCommit,
    depsDir: loopDepsDir(input.dataDir, loop.name),
    // Without a sandbox nothing can be mounted: the installs run in the worktree, as the user would.
    mode: input.sandboxed ? settings['forge.worktree.dependencies'] : 'install',
    settingCommands: settings['forge.worktree.setup'],
  });
  if (!setupHasWork(plan)) return null;
  if (input.sandboxed) await makeMountPoints(plan, loop.worktreeDir);
  else plan.folders = plan.folders.map((f) => ({ ...f, source: path.join(loop.worktreeDir!, f.folder) }));
  return plan;
}

/** At a restart: a setup that failed, or whose prepared parts the worktree lacks now, runs again. */
export async function setupNeedsRun(s: WorktreeSetupState, worktreeDir: string): Promise<boolean> {
  if (s.status !== 'done') return true;
  for (const f of s.copied) if (!(await lstat(path.join(worktreeDir, f.path)).catch(() => null))) return true;
  for (const f of s.folders) {
    const st = await lstat(path.join(worktreeDir, f.folder)).catch(() => null);
    if (!st?.isDirectory()) return true;
  }
  return false;
}

export interface LoopSetupPhaseDeps {
  dataDir: string;
  repos: ForgeRepositories;
  emit(event: LoopRuntimeEvent): void;
  log: EngineLog;
  /** Where the setup's commands run: the setup sandbox (network on, cache writable) or the host. */
  executor(loop: LoopRow): Promise<ScratchCheckRun>;
}

/**
 * The supervisor's setup phase: runs the loop's setup when it has one that is not done (or whose
 * parts the worktree lost); null when the coder may start, else the setup_failed message.
 */
export async function runSetupPhase(deps: LoopSetupPhaseDeps, ref: LoopRef, signal?: AbortSignal): Promise<string | null> {
  const loop = deps.repos.loops.get(ref.projectId, ref.name);
  const state = loop ? readSetupState(loop) : undefined;
  if (!loop || !state || !loop.worktreeDir) return null;
  if (!(await setupNeedsRun(state, loop.worktreeDir))) return null;
  const started = Date.now();
  deps.emit({ type: 'loop.setup', loop: ref, step: 'setup', status: 'started' });
  let run: ScratchCheckRun | undefined;
  let result: WorktreeSetupState;
  try {
    run = state.commands.length > 0 ? await deps.executor(loop) : undefined;
    result = await runLoopSetup(state, {
      worktreeDir: loop.worktreeDir,
      cacheDir: packageCacheDir(deps.dataDir),
      timeoutMs: readTimeout(loop),
      exec: run?.exec ?? (async () => { throw new Error('no command to run'); }),
      where: run?.where ?? 'the host',
      sandboxed: loop.sandbox,
      git: (cwd, args) => createGitRunner().ok(cwd, args),
      onStep: (s) => deps.emit({ type: 'loop.setup', loop: ref, ...s }),
      onOutputLine: (step, line) => deps.emit({ type: 'loop.setup_output', loop: ref, step, line }),
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    result = { ...state, status: 'failed', message: `the setup could not run: ${(error as Error).message}` };
  } finally {
    await run?.release().catch((e) => deps.log.warn(`[loop ${ref.name}] removing the setup sandbox: ${String(e)}`));
  }
  deps.repos.loops.mergeState(ref.projectId, ref.name, { [WORKTREE_SETUP_STATE_KEY]: result });
  const ms = Date.now() - started;
  deps.emit({ type: 'loop.setup', loop: ref, step: 'setup', status: result.status === 'done' ? 'passed' : 'failed', durationMs: ms });
  return result.status === 'done' ? null : (result.message ?? 'the setup failed');
}

/** The setup's time limit, stored at the loop's start. */
function readTimeout(loop: LoopRow): number {
  const t = loop.state[SETUP_TIMEOUT_STATE_KEY];
  return typeof t === 'number' && t > 0 ? t : 900_000;
}

export const SETUP_TIMEOUT_STATE_KEY = 'setupTimeoutMs';

/** The setup in one line, for the dashboard: what it prepared and how it went. Pure. */
export function describeSetup(s: WorktreeSetupState): string {
  const parts = [
    ...s.folders.map((f) => `${f.folder} ${f.mode === 'reuse' ? "(your checkout's, read-only)" : '(installed)'}`),
    ...(s.copied.length > 0 ? [`${s.copied.length} file${s.copied.length === 1 ? '' : 's'} of .worktreeinclude`] : []),
    ...(s.commands.length > 0 ? [`${s.commands.length} command${s.commands.length === 1 ? '' : 's'}`] : []),
  ];
  const what = parts.length > 0 ? ` · ${parts.join(' · ')}` : '';
  const took = s.durationMs !== undefined ? ` in ${(s.durationMs / 1000).toFixed(1)} s` : '';
  if (s.status === 'failed') return `Setup failed${took}: ${(s.message ?? '').split('\n')[0]}${what}`;
  return s.status === 'done' ? `Setup done${took}${what}` : `Setup pending${what}`;
}
