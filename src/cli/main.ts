/**
 * `forge`: the headless runner over the same engine the extension uses. Composition root of
 * the CLI: settings from defaults + FORGE_SETTINGS + flags, logging to stderr, the embedded
 * scripted model when no model is configured.
 *
 * What a start evaluates at once is kept to what every command needs (arguments, settings, plan
 * checks, the engine's endpoint): the engine, its database and the opencode, MCP and git
 * libraries are imported where a command opens them. A `forge run` that hands its loop to the
 * data folder's engine never loads them, so each extra loop costs a Node process and little more
 * (bench/parallel.mjs; test/core/cli/cli-start-imports.test.ts).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveSettings, type ForgeSettings, type SettingKey } from '../core/config/settings';
import type { ForgeEngine } from '../core/engine';
import { LoopRuntimeError } from '../core/loop/runtime-types';
import { runLoop } from './run-loop';
import { ForgeDatabaseError } from '../core/storage/errors';
import { ensureDataDir, resolveDataDir } from '../core/workspace/data-dir';
import { WorkspaceError } from '../core/workspace/workspace-error';
import { EXIT, parseCli, UsageError, type CliCommand, type HelpTopic } from './args';
import { formatPlanProblem, planProblemCounts } from '../core/loop/plan-validation';
import { validatePlanInRepository } from './plan-check';
import { PlanDraftError } from '../core/plan-draft/architect-prompt';
import { describeBudget, describeEstimate, formatMoney, formatTokens, type LoopBudget } from '../core/loop/budget';
import { GroupError } from '../core/groups/group-types';
import { readInputFile } from './read-input';
import { inertText } from '../core/text/inert-text';
import { namedLoopModels } from '../core/opencode/model-check';
// Light (the engine client, as a handed-over run uses): loaded at start, not a chunk of its own.
import { tellLoop as tellSupervisedLoop } from '../core/engine-host/tell-loop';
import { cancelLoop as cancelSupervisedLoop } from '../core/engine-host/cancel-loop';

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
/**
 * Every line the CLI prints passes here, and leaves inert: findings, plan titles, transcripts and
 * log lines carry model text, so escape sequences and control characters are shown as `\uXXXX`
 * rather than acted on by the terminal. A `--json` line stays the same JSON value (the escape is
 * JSON's own).
 */
function writeLine(stream: NodeJS.WriteStream, line: string): void {
  if (closedOutputs.has(stream)) return;
  try {
    stream.write(inertText(line) + '\n');
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

/**
 * The built CLI imports parts of itself (chunks beside dist/cli.mjs) where a command needs them,
 * some at a command's end. The build keeps an earlier build's chunks a day (esbuild.mjs), so a
 * rebuild or upgrade under a running command almost never removes one; when it did, this says so
 * instead of an internal error.
 */
class ForgeFilesChangedError extends Error {}
async function loadPart<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw error;
    throw new ForgeFilesChangedError(`Forge's own files changed while this command ran (it was rebuilt or upgraded), so it could not load a part of itself: ${(error as Error).message.split('\n')[0]}. Run the command again.`, { cause: error });
  }
}

/**
 * `forge tell` (issue 29): the user's words go to the process that supervises the loop — the data
 * folder's engine (a `forge run` or a VS Code window) — which sends them into the running session
 * or keeps them for the next session's prompt. This process writes nothing.
 */
async function tellLoop(engine: ForgeEngine, cmd: Extract<CliCommand, { command: 'tell' }>): Promise<number> {
  const { projectId } = await engine.runtime.projectOf(cmd.repo);
  const told = await tellSupervisedLoop(engine.runtime, dataDirOf(cmd), { projectId, name: cmd.name }, cmd.text);
  const where = told.delivery === 'session' ? `sent into its running session ${told.sessionId}` : "kept for its next session's prompt (the loop is between sessions)";
  out(cmd.json ? JSON.stringify({ loop: cmd.name, delivery: told.delivery, sessionId: told.sessionId }) : `Message to loop "${cmd.name}" ${where}.`);
  return 0;
}

function dataDirOf(cmd: Exclude<CliCommand, { command: 'help' }>): string {
  return resolve(cmd.dataDir ?? resolveDataDir(process.env));
}

async function openEngine(cmd: Exclude<CliCommand, { command: 'help' }>, settings: ForgeSettings): Promise<ForgeEngine> {
  const dataDir = dataDirOf(cmd);
  const debug = process.env.FORGE_LOG === 'debug';
  // dist/ in the bundle (where sql-wasm.wasm and agents/ are copied beside cli.mjs).
  const assetsDir = dirname(fileURLToPath(import.meta.url));
  const [{ createForgeEngine }, { startEmbeddedModel }] = await Promise.all([loadPart(() => import('../core/engine')), loadPart(() => import('../core/opencode/embedded-model'))]);
  const engine = await createForgeEngine({
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
    hostKind: 'cli',
    // Commands that only read must leave the data folder as they found it, damaged files included.
    readOnly: cmd.command === 'status' || cmd.command === 'tell' || (cmd.command === 'findings' && cmd.accept === null) || (cmd.command === 'group' && cmd.action === 'status'),
  });
  // What the engine's start removed after a killed Forge process (on stderr: stdout stays the command's).
  const { removed, problems } = engine.crashCleanup;
  if (removed.length > 0) err(`forge: cleaned up after a Forge process that was killed or crashed; removed: ${removed.join('; ')}`);
  for (const p of problems) err(`forge: warning: clean-up after a crash: ${p}`);
  return engine;
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
            // Default: the data folder's plans/forge-plan-ID.md (outside the working tree), as in VS Code.
            ...(cmd.outPath ? { outPath: resolve(cmd.outPath) } : {}),
            signal: abort.signal,
            onProgress,
          })
        : await engine.planner.continue({ repoPath: cmd.repo, id: cmd.continueId, answer: cmd.request, signal: abort.signal, onProgress });
    const { formatDraftResult } = await loadPart(() => import('./format-plan'));
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
    // The same validation as `forge check` and a real start: warnings printed, errors refuse.
    const { problems, plan } = validatePlanInRepository(text, cmd.planPath, cmd.repo);
    for (const p of problems) err(`forge: ${formatPlanProblem(cmd.planPath, p)}`);
    const { errors } = planProblemCounts(problems);
    if (errors > 0 || !plan) throw new UsageError(`${cmd.planPath} has ${errors === 1 ? 'an error' : `${errors} errors`} (above); fix ${errors === 1 ? 'it' : 'them'} and run again.`);
    size = { kind: 'plan' as const, chars: plan.text.length, sections: plan.sections.length };
  } else {
    size = { kind: 'goal' as const, chars: cmd.goal.length, sections: 0 };
  }
  // The same model check as a start: every model named, against opencode's catalog.
  const named = namedLoopModels(cmd, { model: settings['forge.model'], auditorModel: settings['forge.auditorModel'], auditorFallbackModels: settings['forge.auditorFallbackModels'] });
  const fromEnv = !cmd.model && !settings['forge.model'] ? process.env.FORGE_MODEL : undefined;
  if (fromEnv) named.push({ role: 'coding model (FORGE_MODEL)', model: fromEnv });
  const modelProblem = await engine.checkModels(cmd.repo, named);
  if (modelProblem) throw new UsageError(modelProblem);
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

/** Help, version or completion script (help.ts is loaded only for them). */
async function helpText(topic: HelpTopic): Promise<string> {
  const help = await loadPart(() => import('./help'));
  return help.helpText(topic, topic === 'version' ? forgeVersion() : '');
}

/** The version in Forge's package.json, beside dist/ in a checkout, an npm install and the VSIX. */
function forgeVersion(): string {
  try {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
    if (manifest.name === 'forge' && typeof manifest.version === 'string') return manifest.version;
  } catch {
    // Below: a copy of dist/ without its package.
  }
  return 'unknown (no package.json of Forge beside dist/)';
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
      // The message, then the command's usage line: a few lines, not the whole help.
      err(`forge: ${error.message}\n${(await loadPart(() => import('./help'))).usageHint(error.verb)}`);
      return EXIT.badInput;
    }
    throw error;
  }
  if (cmd.command === 'help') {
    out(await helpText(cmd.topic));
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
    if ((cmd.command === 'run' || cmd.command === 'goal' || cmd.command === 'restart') && !(cmd.command !== 'restart' && cmd.dryRun)) {
      // An unusable data folder (a file, read-only) is one clear line before anything else.
      await ensureDataDir(dataDirOf(cmd));
      // Opened only when needed: a loop handed to the data folder's engine never needs it.
      let opening: Promise<ForgeEngine> | undefined;
      const open = () =>
        (opening ??= openEngine(cmd, settings).then((e) => {
          engine = e;
          return e;
        }));
      return await runLoop(dataDirOf(cmd), open, cmd, settings, { out, err });
    }
    engine = await openEngine(cmd, settings);
    switch (cmd.command) {
      case 'run':
      case 'goal':
        // Only a dry run gets here (the runs went above).
        return await dryRun(engine, cmd, settings);
      case 'plan':
        return await draftPlan(engine, cmd);
      case 'group':
        return await (await loadPart(() => import('./group-command'))).runGroupCommand(engine, cmd, { out, err });
      case 'status': {
        const [{ formatLoopDetail, formatLoopList }, { formatGroupList, groupsWithRadar }] = await Promise.all([loadPart(() => import('./format')), loadPart(() => import('./group-command'))]);
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
        if (cmd.accept !== null) {
          // The user's word (issue 27): a finding no agent may resolve, a check's or the gate's, is dismissed here.
          const finding = engine.repos.reviewFindings.get(projectId, cmd.accept);
          if (!finding || finding.loopName !== cmd.name) throw new LoopRuntimeError('not_found', `Loop "${cmd.name}" has no finding #${cmd.accept}. "forge findings ${cmd.name}" lists them.`);
          if (finding.status === 'open') engine.repos.reviewFindings.setStatus(projectId, finding.id, 'dismissed');
          out(cmd.json ? JSON.stringify({ loop: cmd.name, finding: finding.id, status: 'dismissed' }) : `Finding #${finding.id} of loop "${cmd.name}": ${finding.status === 'open' ? 'accepted (dismissed)' : `already ${finding.status}`}. "forge restart ${cmd.name}" goes on without it.`);
          return 0;
        }
        const { formatFindings } = await loadPart(() => import('./format'));
        out(formatFindings(engine, projectId, cmd.name, cmd.json));
        return 0;
      }
      case 'review':
        return await (await loadPart(() => import('./review-command'))).runReviewCommand(engine, cmd, settings, { out, err }, runLoop);
      case 'accept':
        return await (await loadPart(() => import('./accept-command'))).runAcceptCommand(engine, cmd, settings, { out, err });
      case 'tell':
        return await tellLoop(engine, cmd);
      case 'cancel': {
        const { projectId } = await engine.runtime.projectOf(cmd.repo);
        const outcome = await cancelSupervisedLoop(engine.runtime, dataDirOf(cmd), { projectId, name: cmd.name });
        const loop = engine.runtime.get({ projectId, name: cmd.name });
        out(cmd.json ? JSON.stringify({ loop: cmd.name, status: outcome === 'cancelled' ? 'cancelled' : loop?.status }) : `Loop "${cmd.name}": ${outcome === 'cancelled' ? 'cancelled' : 'cancel requested from its supervising process'}.`);
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
    if (error instanceof ForgeFilesChangedError) {
      err(`forge: ${error.message}`);
      return EXIT.internal;
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
