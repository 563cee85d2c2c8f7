/**
 * `forge`: the headless runner over the same engine the extension uses. Composition root of
 * the CLI: settings from defaults + FORGE_SETTINGS + flags, logging to stderr, the embedded
 * scripted model when no model is configured.
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveSettings, type ForgeSettings, type SettingKey } from '../core/config/settings';
import { createForgeEngine, type ForgeEngine } from '../core/engine';
import { LoopRuntimeError, type LoopRef, type LoopRuntimeEvent, type RestartLoopOptions, type StartLoopRequest } from '../core/loop/runtime-types';
import { becomeEngine, compatibilityKey, connectToEngine, type EngineEndpoint } from '../core/engine-host';
import { runHandedOver } from './handover';
import { ForgeDatabaseError } from '../core/storage';
import { resolveDataDir, WorkspaceError } from '../core/workspace';
import { EXIT, exitCodeFor, parseCli, USAGE, UsageError, type CliCommand } from './args';
import { startEmbeddedModel, userHasDefaultModel } from '../core/opencode/embedded-model';
import { formatEvent, formatFindings, formatLoopDetail, formatLoopList } from './format';
import { formatPlanProblem, planProblemCounts } from '../core/loop/plan-validation';
import { validatePlanInRepository } from './plan-check';
import { formatDraftResult } from './format-plan';
import { PlanDraftError } from '../core/plan-draft/architect-prompt';
import { parsePlan, PlanError } from '../core/loop/plan';
import { describeBudget, describeEstimate, formatMoney, formatTokens, type LoopBudget } from '../core/loop/budget';
import { FollowLines, type FollowLine } from '../core/live/follow-lines';
import { GroupError } from '../core/groups/group-types';
import { formatGroupList, groupsWithRadar, runGroupCommand } from './group-command';
import { readInputFile } from './read-input';

/**
 * Output that cannot be written any more is dropped: it never crashes the CLI nor ends a loop.
 * `forge run … | head -2` closes the pipe after two lines (EPIPE on the next write), a closed
 * terminal gives EIO. `| head` is a way to look at the start of the output, not a request to
 * stop, so the loop goes on to its end under this process's supervision with its output dropped,
 * and the exit code still tells how it ended. A closed terminal also sends SIGHUP, which cancels
 * the loop cleanly like Ctrl-C (see runLoop).
 */
const closedOutputs = new Set<NodeJS.WriteStream>();
function outputClosed(stream: NodeJS.WriteStream): void {
  if (closedOutputs.has(stream)) return;
  closedOutputs.add(stream);
  if (stream === process.stdout) {
    err('forge: standard output was closed; what follows is dropped. A running loop goes on to its end (the exit code tells how it ended; Ctrl-C cancels it).');
  }
}
function writeLine(stream: NodeJS.WriteStream, line: string): void {
  if (closedOutputs.has(stream)) return;
  try {
    stream.write(line + '\n');
  } catch {
    outputClosed(stream);
  }
}
// Write errors arrive as 'error' events; without a listener each would be an uncaught exception.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => outputClosed(stream));

const out = (line: string) => writeLine(process.stdout, line);
const err = (line: string) => writeLine(process.stderr, line);

const SETTINGS_EXAMPLE = `FORGE_SETTINGS='{"forge.loop.maxIterations": 5, "forge.sandbox.enabled": true}'`;

/** `FORGE_SETTINGS` as the object of settings it must be; anything else is bad input. */
function parseSettingsVariable(text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`FORGE_SETTINGS is not valid JSON (${(error as Error).message}). It must be a JSON object of forge.* settings, for example ${SETTINGS_EXAMPLE}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    const got = parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`;
    throw new UsageError(`FORGE_SETTINGS must be a JSON object of forge.* settings, not ${got} (${JSON.stringify(parsed)}). For example ${SETTINGS_EXAMPLE}`);
  }
  return parsed as Record<string, unknown>;
}

function cliSettings(cmd: CliCommand): ForgeSettings {
  const fromEnv = process.env.FORGE_SETTINGS ? parseSettingsVariable(process.env.FORGE_SETTINGS) : {};
  const { settings, problems } = resolveSettings((key: SettingKey) => fromEnv[key], Object.keys(fromEnv));
  for (const p of problems) err(`forge: warning: ${p.message}`);
  if ((cmd.command === 'run' || cmd.command === 'goal') && cmd.merge) settings['forge.loop.merge'] = cmd.merge;
  return settings;
}

async function openEngine(cmd: Exclude<CliCommand, { command: 'help' }>, settings: ForgeSettings): Promise<ForgeEngine> {
  const dataDir = resolve(cmd.dataDir ?? resolveDataDir(process.env));
  const debug = process.env.FORGE_LOG === 'debug';
  // dist/ in the bundle (where sql-wasm.wasm and agents/ are copied beside cli.cjs).
  const assetsDir = dirname(fileURLToPath(import.meta.url));
  return createForgeEngine({
    dataDir,
    settings: () => settings,
    log: {
      debug: (m) => debug && err(`debug ${m}`),
      info: (m) => debug && err(`info  ${m}`),
      warn: (m) => err(`forge: warning: ${m}`),
      error: (m) => err(`forge: error: ${m}`),
    },
    assetsDir,
    env: process.env,
    embeddedModel: startEmbeddedModel,
    userHasDefaultModel: () => userHasDefaultModel(process.env),
    hostKind: 'cli',
    // Commands that only read must leave the data folder as they found it, damaged files included.
    readOnly: cmd.command === 'status' || cmd.command === 'findings' || (cmd.command === 'group' && cmd.action === 'status'),
  });
}

async function runLoop(engine: ForgeEngine, cmd: Extract<CliCommand, { command: 'run' | 'goal' | 'restart' }>, settings: ForgeSettings): Promise<number> {
  // One engine per data folder: unless opted out, a live engine there supervises this loop.
  const share = !cmd.noHandover && settings['forge.engine.shareProcess'];
  // --merge travels in the request (below), so it is no part of what must match.
  const compat = compatibilityKey({ ...settings, 'forge.loop.merge': null }, process.env);
  let what: { type: 'start'; request: StartLoopRequest } | { type: 'restart'; ref: LoopRef; options: RestartLoopOptions };
  if (cmd.command === 'restart') {
    const ref = { projectId: (await engine.runtime.projectOf(cmd.repo)).projectId, name: cmd.name };
    what = {
      type: 'restart',
      ref,
      options: {
        force: cmd.force,
        ...(cmd.model ? { model: cmd.model } : {}),
        ...(cmd.auditorModel ? { auditorModel: cmd.auditorModel } : {}),
        ...(cmd.variant ? { variant: cmd.variant } : {}),
        ...(cmd.budget ? { budget: cmd.budget } : {}),
      },
    };
  } else {
    let planText: string | undefined;
    if (cmd.command === 'run') {
      planText = await readPlan(cmd.planPath);
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
        repoPath: cmd.repo,
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
    const conn = await connectToEngine(engine.dataDir);
    if (conn) {
      const code = await runHandedOver(conn, { ...what, follow: cmd.follow, compat }, { json: cmd.json, follow: cmd.follow, out, err, getLoop: (r) => engine.runtime.get(r) });
      if (code !== 'self') return code;
    }
  }
  return superviseHere(engine, cmd, what, share ? compat : null);
}

/** This process supervises the loop; with `compat`, it also becomes the data folder's engine (when none is). */
async function superviseHere(
  engine: ForgeEngine,
  cmd: Extract<CliCommand, { command: 'run' | 'goal' | 'restart' }>,
  what: { type: 'start'; request: StartLoopRequest } | { type: 'restart'; ref: LoopRef; options: RestartLoopOptions },
  compat: string | null,
): Promise<number> {
  let ref: LoopRef | undefined = what.type === 'restart' ? what.ref : undefined;
  const mine = (l: LoopRef) => !ref || (l.name === ref.name && l.projectId === ref.projectId);
  // --follow: what the agent does, from the engine's live feed (this process prints its own loop only).
  let follower: FollowLines | undefined;
  const printFollow = (lines: FollowLine[]) => {
    for (const l of lines) out(cmd.json ? JSON.stringify(l.json) : l.text);
  };
  const unfollow = cmd.follow
    ? engine.live.subscribe((e) => {
        if (!mine(e.loop)) return;
        follower ??= new FollowLines(e.loop.name);
        printFollow(follower.onEvent(e));
      })
    : () => true;
  const print = (e: LoopRuntimeEvent) => {
    // Loops handed over by other processes are theirs to print.
    if (!mine(e.loop)) return;
    // What the agent left unfinished comes before the phase change or the end that cut it.
    if (follower && (e.type === 'loop.phase' || e.type === 'loop.ended' || e.type === 'loop.supervision_lost')) printFollow(follower.flush());
    const line = formatEvent(e, cmd.json);
    if (line) out(line);
  };
  let unsubscribe = engine.runtime.subscribe(print);
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
    if (compat !== null) endpoint = await listenAsEngine(engine, compat);
    const end = await engine.runtime.waitForEnd(ref!);
    const code = end.type === 'loop.supervision_lost' ? EXIT.supervisionLost : exitCodeFor(end.reason);
    for (const signal of signals) process.off(signal, onSignal);
    if (endpoint) await waitForHandedOver(engine, endpoint, ref!);
    return code;
  } finally {
    for (const signal of signals) process.off(signal, onSignal);
    unsubscribe();
    unsubscribe = () => true;
    unfollow();
    await endpoint?.close().catch((e) => err(`forge: closing the engine endpoint: ${String(e)}`));
  }
}

async function listenAsEngine(engine: ForgeEngine, compat: string): Promise<EngineEndpoint | null> {
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
async function waitForHandedOver(engine: ForgeEngine, endpoint: EngineEndpoint, ref: LoopRef): Promise<void> {
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

/** `forge check`: the plan's problems, one per line (or one JSON object); exit 2 when any is an error. */
async function checkPlan(cmd: Extract<CliCommand, { command: 'check' }>): Promise<number> {
  const text = await readPlan(cmd.planPath);
  const { problems, plan } = validatePlanInRepository(text, cmd.planPath, cmd.repo);
  const { errors, warnings } = planProblemCounts(problems);
  if (cmd.json) {
    out(JSON.stringify({ plan: cmd.planPath, sections: plan?.sections.length ?? null, errors, warnings, problems: problems.map((p) => ({ ...p, line: p.line + 1 })) }));
  } else {
    for (const p of problems) out(formatPlanProblem(cmd.planPath, p));
    const counts = `${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}`;
    out(
      errors > 0
        ? `${cmd.planPath}: ${counts}; forge run refuses it until the errors are fixed.`
        : `${cmd.planPath}: ${plan!.sections.length} section${plan!.sections.length === 1 ? '' : 's'}, ${counts}; ready to run.`,
    );
  }
  return errors > 0 ? EXIT.badInput : 0;
}

/** `forge plan`: one architect turn (a new draft, or --continue), its plan written to a file. */
async function draftPlan(engine: ForgeEngine, cmd: Extract<CliCommand, { command: 'plan' }>): Promise<number> {
  const abort = new AbortController();
  const onSignal = () => {
    err('forge: interrupting the architect (the session is kept for --continue)…');
    abort.abort();
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, onSignal);
  const onProgress = (m: string) => (cmd.json ? undefined : err(`forge: ${m}`));
  try {
    const result =
      cmd.continueId === null
        ? await engine.planner.draft({
            repoPath: cmd.repo,
            request: cmd.request,
            model: cmd.model,
            // Default: a file in the current folder, named after the draft (forge-plan-ID.md).
            ...(cmd.outPath ? { outPath: resolve(cmd.outPath) } : { outDir: process.cwd() }),
            signal: abort.signal,
            onProgress,
          })
        : await engine.planner.continue({ repoPath: cmd.repo, id: cmd.continueId, answer: cmd.request, signal: abort.signal, onProgress });
    const { stdout, stderr } = formatDraftResult(result, cmd.json);
    for (const line of stderr) err(line);
    if (stdout) out(stdout);
    return result.outcome.kind === 'drafted' ? EXIT.completed : EXIT.agentFailure;
  } finally {
    for (const signal of signals) process.off(signal, onSignal);
  }
}

/**
 * `forge run --dry-run`: the plan is read and checked, the models resolved and priced from
 * opencode's catalog, and the estimate printed. No loop starts: no worktree, no database row.
 */
async function dryRun(engine: ForgeEngine, cmd: Extract<CliCommand, { command: 'run' | 'goal' }>, settings: ForgeSettings): Promise<number> {
  let size;
  if (cmd.command === 'run') {
    const text = await readPlan(cmd.planPath);
    try {
      const plan = parsePlan(text, cmd.planPath);
      size = { kind: 'plan' as const, chars: plan.text.length, sections: plan.sections.length };
    } catch (error) {
      if (error instanceof PlanError) throw new UsageError(error.message);
      throw error;
    }
  } else {
    size = { kind: 'goal' as const, chars: cmd.goal.length, sections: 0 };
  }
  const estimate = await engine.estimateCost({ repoPath: cmd.repo, size, model: cmd.model, auditorModel: cmd.auditorModel });
  const orNull = (n: number) => (n > 0 ? n : null);
  const budget: LoopBudget = {
    money: cmd.budget?.money ?? orNull(settings['forge.budget.money']),
    tokens: cmd.budget?.tokens ?? orNull(settings['forge.budget.tokens']),
    auditorShare: cmd.budget?.auditorShare ?? orNull(settings['forge.budget.auditorShare']),
  };
  const over = [
    budget.money !== null && estimate.cost !== null && estimate.cost > budget.money ? `the estimate (${formatMoney(estimate.cost)}) is above the money budget (${formatMoney(budget.money)})` : null,
    budget.tokens !== null && estimate.tokens > budget.tokens ? `the estimate (${formatTokens(estimate.tokens)}) is above the token budget (${formatTokens(budget.tokens)})` : null,
  ].filter((x): x is string => x !== null);
  if (cmd.json) {
    out(JSON.stringify({ dryRun: true, estimate: { cost: estimate.cost, tokens: estimate.tokens, basis: estimate.basis, isEstimate: true }, model: estimate.model, auditorModel: estimate.auditorModel, budget, overBudget: over }));
  } else {
    out(`dry run: nothing started (no worktree, no loop).`);
    out(`models: coding ${estimate.model ?? 'your opencode default'}, audit ${estimate.auditorModel ?? 'same as coding'}`);
    out(describeEstimate(estimate));
    out(`budget: ${describeBudget(budget)}${over.length > 0 ? ` — ${over.join('; ')}: the loop would likely pause before it ends` : ''}`);
  }
  return EXIT.completed;
}

function readPlan(path: string): Promise<string> {
  return readInputFile(path, 'Plan');
}

async function main(argv: string[]): Promise<number> {
  let cmd: CliCommand;
  try {
    cmd = parseCli(argv, process.cwd());
  } catch (error) {
    if (error instanceof UsageError) {
      err(`forge: ${error.message}\n\n${USAGE}`);
      return EXIT.badInput;
    }
    throw error;
  }
  if (cmd.command === 'help') {
    out(USAGE);
    return 0;
  }
  if (cmd.command === 'check') {
    // Read-only: no settings, engine or database are opened.
    try {
      return await checkPlan(cmd);
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      err(`forge: ${error.message}`);
      return EXIT.badInput;
    }
  }
  let engine: ForgeEngine | undefined;
  try {
    const settings = cliSettings(cmd);
    engine = await openEngine(cmd, settings);
    switch (cmd.command) {
      case 'run':
      case 'goal':
        if (cmd.dryRun) return await dryRun(engine, cmd, settings);
        return await runLoop(engine, cmd, settings);
      case 'restart':
        return await runLoop(engine, cmd, settings);
      case 'plan':
        return await draftPlan(engine, cmd);
      case 'group':
        return await runGroupCommand(engine, cmd, { out, err });
      case 'status': {
        const { projectId } = await engine.runtime.projectOf(cmd.repo);
        if (cmd.name) {
          const loop = engine.runtime.get({ projectId, name: cmd.name });
          if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${cmd.name}" in this repository. "forge status" lists them.`);
          out(formatLoopDetail(engine, loop, cmd.json));
        } else {
          const loops = formatLoopList(engine, projectId, cmd.json);
          const groups = formatGroupList(await groupsWithRadar(engine, projectId), cmd.json);
          // --json: one object per line, loops then groups (a group's object has a "group" key).
          const lines = [loops, ...groups].filter((l, i) => i > 0 || l !== '' || groups.length === 0);
          out(lines.join('\n'));
        }
        return 0;
      }
      case 'findings': {
        const { projectId } = await engine.runtime.projectOf(cmd.repo);
        const loop = engine.runtime.get({ projectId, name: cmd.name });
        if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${cmd.name}" in this repository. "forge status" lists them.`);
        out(formatFindings(engine, projectId, cmd.name, cmd.json));
        return 0;
      }
      case 'cancel': {
        const { projectId } = await engine.runtime.projectOf(cmd.repo);
        await engine.runtime.cancel({ projectId, name: cmd.name });
        const loop = engine.runtime.get({ projectId, name: cmd.name });
        out(cmd.json ? JSON.stringify({ loop: cmd.name, status: loop?.status }) : `Loop "${cmd.name}": ${loop?.status === 'cancelled' ? 'cancelled' : 'cancel requested from its supervising process'}.`);
        return 0;
      }
    }
    return EXIT.internal;
  } catch (error) {
    if (error instanceof UsageError) {
      err(`forge: ${error.message}`);
      return EXIT.badInput;
    }
    if (error instanceof LoopRuntimeError) {
      err(`forge: ${error.message}`);
      return error.code === 'opencode' ? EXIT.opencodeFailure : error.code === 'sandbox' ? EXIT.worktreeFailure : EXIT.badInput;
    }
    if (error instanceof PlanDraftError) {
      err(`forge: ${error.message}`);
      return error.code === 'opencode' ? EXIT.opencodeFailure : error.code === 'busy' ? EXIT.cancelled : EXIT.badInput;
    }
    if (error instanceof GroupError) {
      err(`forge: ${error.message}`);
      return error.code === 'opencode' ? EXIT.opencodeFailure : error.code === 'interrupted' ? EXIT.cancelled : EXIT.badInput;
    }
    if (error instanceof WorkspaceError || error instanceof ForgeDatabaseError) {
      err(`forge: ${error.message}`);
      return EXIT.badInput;
    }
    err(`forge: internal error: ${(error as Error).stack ?? String(error)}`);
    return EXIT.internal;
  } finally {
    await engine?.close().catch((e) => err(`forge: closing: ${String(e)}`));
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    err(`forge: internal error: ${(error as Error).stack ?? String(error)}`);
    process.exit(EXIT.internal);
  },
);
