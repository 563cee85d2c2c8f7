/**
 * `forge run`, `forge goal`, `forge restart`: the loop is handed to the data folder's engine when
 * one runs (handover.ts prints it), else this process supervises it, prints it, and becomes the
 * data folder's engine for later runs while it lives.
 */
import { resolve } from 'node:path';
import type { ForgeSettings } from '../core/config/settings';
import type { ForgeEngine } from '../core/engine';
import { becomeEngine, compatibilityKey, connectOrClaimEngine, type EngineEndpoint } from '../core/engine-host';
import { formatPlanProblem, planProblemCounts } from '../core/loop/plan-validation';
import type { LoopRef, RestartLoopOptions, StartLoopRequest } from '../core/loop/runtime-types';
import { EXIT, exitCodeFor, UsageError, type CliCommand } from './args';
import { LoopPrinter } from './loop-printer';
import { runHandedOver } from './handover';
import { validatePlanInRepository } from './plan-check';
import { readInputFile } from './read-input';

type RunCommand = Extract<CliCommand, { command: 'run' | 'goal' | 'restart' }>;

/**
 * `openEngine` opens this process's engine (the database, sql.js) only when it is needed: a run
 * that hands its loop over never opens it unless the engine hangs up (then it reads the loop's
 * row), so a loop handed over costs little more than a Node process.
 */
export async function runLoop(dataDir: string, openEngine: () => Promise<ForgeEngine>, cmd: RunCommand, settings: ForgeSettings, io: { out(line: string): void; err(line: string): void }): Promise<number> {
  const { out, err } = io;
  // One engine per data folder: unless opted out, a live engine there supervises this loop.
  const share = !cmd.noHandover && settings['forge.engine.shareProcess'];
  const compat = compatibilityKey(settings, process.env);
  let what: { type: 'start'; request: StartLoopRequest } | { type: 'restart'; ref: LoopRef; options: RestartLoopOptions };
  if (cmd.command === 'restart') {
    const ref = { projectId: (await (await openEngine()).runtime.projectOf(cmd.repo)).projectId, name: cmd.name };
    what = {
      type: 'restart',
      ref,
      options: {
        force: cmd.force,
        ...(cmd.model ? { model: cmd.model } : {}),
        ...(cmd.auditorModel ? { auditorModel: cmd.auditorModel } : {}),
        ...(cmd.variant ? { variant: cmd.variant } : {}),
        ...(cmd.budget ? { budget: cmd.budget } : {}),
        ...(cmd.review ? { review: cmd.review } : {}),
      },
    };
  } else {
    let planText: string | undefined;
    if (cmd.command === 'run') {
      planText = await readInputFile(cmd.planPath, 'Plan');
      // The same validation as `forge check` and the editor: warnings are printed, errors refuse the start.
      const { problems } = validatePlanInRepository(planText, cmd.planPath, cmd.repo);
      for (const p of problems) err(`forge: ${formatPlanProblem(cmd.planPath, p)}`);
      const { errors } = planProblemCounts(problems);
      if (errors > 0) {
        throw new UsageError(`${cmd.planPath} has ${errors === 1 ? 'an error' : `${errors} errors`} (above); fix ${errors === 1 ? 'it' : 'them'} and run again. "forge check ${cmd.planPath}" checks a plan without running it.`);
      }
    }
    what = {
      type: 'start',
      request: {
        kind: cmd.command === 'run' ? 'plan' : 'goal',
        // Absolute: the engine that may start it runs in another working directory.
        repoPath: resolve(cmd.repo),
        ...(planText !== undefined && cmd.command === 'run' ? { planText, planSource: cmd.planPath } : {}),
        ...(cmd.command === 'goal' ? { goal: cmd.goal, checks: cmd.checks } : {}),
        ...(cmd.name !== null ? { name: cmd.name } : {}),
        ...(cmd.maxIterations !== null ? { maxIterations: cmd.maxIterations } : {}),
        ...(cmd.model ? { model: cmd.model } : {}),
        ...(cmd.auditorModel ? { auditorModel: cmd.auditorModel } : {}),
        ...(cmd.variant ? { variant: cmd.variant } : {}),
        ...(cmd.sandbox !== null ? { sandbox: cmd.sandbox } : {}),
        ...(cmd.budget ? { budget: cmd.budget } : {}),
        merge: settings['forge.loop.merge'],
      },
    };
  }
  if (share) {
    const found = await connectOrClaimEngine(dataDir);
    if ('conn' in found) {
      const code = await runHandedOver(found.conn, { ...what, follow: cmd.follow, compat }, { json: cmd.json, follow: cmd.follow, out, err, getLoop: async (r) => (await openEngine()).runtime.get(r) });
      if (code !== 'self') return code;
    }
  }
  return superviseHere(await openEngine(), cmd, what, share ? compat : null, io);
}

/** This process supervises the loop; with `compat`, it also becomes the data folder's engine (when none is). */
async function superviseHere(
  engine: ForgeEngine,
  cmd: RunCommand,
  what: { type: 'start'; request: StartLoopRequest } | { type: 'restart'; ref: LoopRef; options: RestartLoopOptions },
  compat: string | null,
  io: { out(line: string): void; err(line: string): void },
): Promise<number> {
  const { out, err } = io;
  let ref: LoopRef | undefined = what.type === 'restart' ? what.ref : undefined;
  const mine = (l: LoopRef) => !ref || (l.name === ref.name && l.projectId === ref.projectId);
  // This process prints its own loop only: loops handed over by other processes are theirs to print.
  const printer = new LoopPrinter(cmd.json, out, cmd.follow);
  // --follow: what the agent does, from the engine's live feed.
  const unfollow = cmd.follow ? engine.live.subscribe((e) => mine(e.loop) && printer.live(e)) : () => true;
  let unsubscribe = engine.runtime.subscribe((e) => mine(e.loop) && printer.event(e));
  let endpoint: EngineEndpoint | null = null;
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  let onSignal = () => {};
  try {
    if (what.type === 'restart') await engine.runtime.restart(what.ref, what.options);
    else ref = await engine.runtime.start(what.request);
    let interrupted = 0;
    onSignal = () => {
      interrupted++;
      if (interrupted === 1) {
        err(`forge: cancelling loop "${ref!.name}" (worktree and branch are kept)…`);
        void engine.runtime.cancel(ref!).catch((e) => err(`forge: ${(e as Error).message}`));
      } else {
        err('forge: second interrupt, exiting without waiting; the loop stays marked running (restart it with --force).');
        process.exit(EXIT.cancelled);
      }
    };
    // SIGHUP: the terminal was closed; cancel cleanly as for Ctrl-C rather than die leaving the
    // loop marked running without a supervisor.
    for (const signal of signals) process.on(signal, onSignal);
    // Listening only once its own loop runs: what this process prints before is its own loop's.
    if (compat !== null) endpoint = await listenAsEngine(engine, compat, err);
    const end = await engine.runtime.waitForEnd(ref!);
    const code = end.type === 'loop.supervision_lost' ? EXIT.supervisionLost : exitCodeFor(end.reason);
    for (const signal of signals) process.off(signal, onSignal);
    // From here on this process prints nothing of any loop: those it still drives are other processes' to print.
    unsubscribe();
    unfollow();
    if (endpoint) await waitForHandedOver(engine, endpoint, ref!, err);
    return code;
  } finally {
    for (const signal of signals) process.off(signal, onSignal);
    unsubscribe();
    unsubscribe = () => true;
    unfollow();
    await endpoint?.close().catch((e) => err(`forge: closing the engine endpoint: ${String(e)}`));
  }
}

async function listenAsEngine(engine: ForgeEngine, compat: string, err: (line: string) => void): Promise<EngineEndpoint | null> {
  try {
    return await becomeEngine({
      dataDir: engine.dataDir,
      kind: 'cli',
      supervisorId: engine.supervisorId,
      runtime: engine.runtime,
      live: engine.live,
      compat,
      log: { debug: () => {}, info: () => {}, warn: (m) => err(`forge: warning: ${m}`), error: (m) => err(`forge: error: ${m}`) },
      onHandedOver: (r, pid) => err(`forge: supervising loop "${r.name}" handed over by process ${pid}.`),
    });
  } catch (error) {
    // The loop runs all the same; only later runs will not find this process.
    err(`forge: warning: this process cannot be the data folder's engine (${(error as Error).message}); later forge runs supervise their own loops.`);
    return null;
  }
}

/**
 * This process's loop ended; loops other processes handed to it still run. It stays until they
 * end (their clients print them), then exits with its own loop's code. Ctrl-C stops them (shutdown).
 */
async function waitForHandedOver(engine: ForgeEngine, endpoint: EngineEndpoint, ref: LoopRef, err: (line: string) => void): Promise<void> {
  const n = endpoint.handedOver();
  if (n > 0) {
    err(`forge: loop "${ref.name}" ended; this process waits for ${n === 1 ? '1 loop' : `${n} loops`} handed over by other forge processes before it exits (Ctrl-C stops ${n === 1 ? 'it' : 'them'}).`);
  }
  const onSignal = () => {
    err('forge: interrupted: the loops handed over to this process stop now (shutdown; "forge restart NAME" continues each).');
    endpoint.stopAccepting();
    void engine.runtime.dispose('shutdown');
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, onSignal);
  // The endpoint does not hold the process open: this timer does while handed-over loops run.
  const keepAlive = setInterval(() => {}, 60_000);
  try {
    await endpoint.stopWhenIdle();
  } finally {
    clearInterval(keepAlive);
    for (const signal of signals) process.off(signal, onSignal);
  }
}
