import * as vscode from 'vscode';
import type { GoalCheckOptions } from '../../core/checks/parse';
import { describeConfinement } from '../../core/sandbox/confinement';
import type { EngineInfo } from '../../core/engine-host';
import type { LoopRef, StartLoopRequest } from '../../core/loop/runtime-types';
import type { ForgeEngine } from '../engine-contract';
import { runExecutionFlow, type ExecutionChoices, type ExecutionMode } from '../execution-flow';
import { describeEstimate, type PlanSize } from '../../core/loop/budget';
import { parsePlan } from '../../core/loop/plan';
import type { ForgeContext } from '../forge-context';
import { goalContractFromInput, goalContractProblems, hasGoalContract } from '../goal-contract';
import { resolvePlanInput, type PlanInput } from '../plan-source';
import { planProblemsIn } from '../plan-diagnostics';
import { refuseIfUntrusted } from '../trust';
import { engineWithProgress, noWorkspace, refused, registerForgeCommand, type CommandResult } from './command-support';
import { modelCatalog, refuseWithoutOpencode } from './execution-support';

/**
 * Non-interactive use of Execute Plan / Execute Goal (tests, other extensions, keybindings
 * with arguments): anything given here is not asked; `interactive` (default: false when an
 * object is given) decides whether the rest is asked or taken from the last choices and settings.
 */
export interface ExecuteArgs {
  readonly planText?: string;
  readonly planFile?: string | vscode.Uri;
  readonly goal?: string;
  readonly name?: string;
  readonly mode?: ExecutionMode;
  readonly model?: string | null;
  readonly auditorModel?: string | null;
  /** Variant of the coding model (opencode's name, e.g. "high"); null: the model's default. */
  readonly variant?: string | null;
  readonly maxIterations?: number;
  readonly sandbox?: boolean;
  /** Execute Goal: the goal's contract, as `forge goal --check/--exists/--contains/--matches` take it; given, it is not asked. */
  readonly checks?: GoalCheckOptions;
  readonly interactive?: boolean;
}

const MAX_SESSION_PROMPT = 100_000;

function parseArgs(arg: unknown): { explicit: { uri?: vscode.Uri; text?: string }; args: ExecuteArgs; interactive: boolean } {
  if (arg instanceof vscode.Uri) return { explicit: { uri: arg }, args: {}, interactive: true };
  if (arg && typeof arg === 'object') {
    const args = arg as ExecuteArgs;
    const uri = typeof args.planFile === 'string' ? vscode.Uri.file(args.planFile) : args.planFile;
    return {
      explicit: { ...(uri ? { uri } : {}), ...(args.planText !== undefined ? { text: args.planText } : {}) },
      args,
      interactive: args.interactive ?? false,
    };
  }
  return { explicit: {}, args: {}, interactive: true };
}

export function registerExecuteCommands(ctx: ForgeContext): void {

  async function choose(engine: ForgeEngine, kind: 'plan' | 'goal', repoPath: string, args: ExecuteArgs, interactive: boolean, size?: PlanSize): Promise<ExecutionChoices | undefined> {
    const settings = ctx.settings.get();
    return runExecutionFlow({
      kind,
      interactive,
      given: {
        ...(args.mode !== undefined ? { mode: args.mode } : {}),
        ...(args.model !== undefined ? { model: args.model } : {}),
        ...(args.auditorModel !== undefined ? { auditorModel: args.auditorModel } : {}),
        ...(args.variant !== undefined ? { variant: args.variant } : {}),
        ...(args.maxIterations !== undefined ? { maxIterations: args.maxIterations } : {}),
        ...(args.sandbox !== undefined ? { sandbox: args.sandbox } : {}),
      },
      defaults: {
        model: settings['forge.model'] || null,
        auditorModel: settings['forge.auditorModel'] || null,
        maxIterations: settings['forge.loop.maxIterations'],
        sandbox: settings['forge.sandbox.enabled'],
      },
      memory: ctx.executionMemory,
      catalog: () => modelCatalog(ctx, engine, repoPath),
      sandboxAvailability: () => ctx.statusBar.probe(engine),
      ...(size
        ? {
            budget: {
              current: settings['forge.budget.money'] > 0 ? settings['forge.budget.money'] : null,
              estimate: async (model: string | null, auditorModel: string | null) => describeEstimate(await engine.estimateCost({ repoPath, size, model, auditorModel })),
            },
          }
        : {}),
    });
  }

  /** The goal's contract: two optional boxes after the goal text (Escape cancels; empty = no contract). */
  async function askGoalContract(): Promise<GoalCheckOptions | undefined> {
    const commands = await vscode.window.showInputBox({
      title: vscode.l10n.t('Forge: Execute Goal — contract (optional)'),
      prompt: vscode.l10n.t('Commands Forge runs itself in the worktree before the goal may complete, separated by ";" (each must exit 0). Leave empty for none.'),
      placeHolder: vscode.l10n.t('e.g. npm test; node cli.js --version'),
      ignoreFocusOut: true,
      validateInput: (v) => goalContractProblems(goalContractFromInput(v, '')) ?? undefined,
    });
    if (commands === undefined) return undefined;
    const files = await vscode.window.showInputBox({
      title: vscode.l10n.t('Forge: Execute Goal — file assertions (optional)'),
      prompt: vscode.l10n.t('Files that must hold, separated by ";": PATH:TEXT (contains TEXT), PATH (exists), matches: PATH:/REGEX/. Paths are relative to the repository. Leave empty for none.'),
      placeHolder: vscode.l10n.t('e.g. README.md:## Usage'),
      ignoreFocusOut: true,
      validateInput: (v) => goalContractProblems(goalContractFromInput('', v)) ?? undefined,
    });
    if (files === undefined) return undefined;
    return goalContractFromInput(commands, files);
  }

  async function startLoop(engine: ForgeEngine, kind: 'plan' | 'goal', repoPath: string, choices: ExecutionChoices, input: { plan?: PlanInput; goal?: string; checks?: GoalCheckOptions; name?: string }): Promise<CommandResult> {
    const request: StartLoopRequest = {
      kind,
      repoPath,
      ...(input.plan ? { planText: input.plan.text, planSource: input.plan.source } : {}),
      ...(input.goal !== undefined ? { goal: input.goal } : {}),
      ...(input.checks && hasGoalContract(input.checks) ? { checks: input.checks } : {}),
      ...(input.name ? { name: input.name } : {}),
      maxIterations: choices.maxIterations,
      ...(choices.model ? { model: choices.model } : {}),
      ...(choices.auditorModel ? { auditorModel: choices.auditorModel } : {}),
      ...(choices.variant ? { variant: choices.variant } : {}),
      ...(choices.sandbox !== null ? { sandbox: choices.sandbox } : {}),
      ...(choices.budget !== undefined ? { budget: { money: choices.budget } } : {}),
    };
    const started = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: starting the {0} loop…', kind) }, async () => {
      // One engine per data folder: another live process that is the engine supervises it (the
      // merge mode travels with the request, as with forge run); else this window does.
      const handed = await ctx.engine.handOver({ type: 'start', request: { ...request, merge: ctx.settings.get()['forge.loop.merge'] } });
      if (handed.action === 'handed') return { ...handed.ref, notices: handed.notices, confinement: undefined, engine: handed.engine };
      return { ...(await engine.runtime.start(request)), engine: undefined };
    });
    await ctx.executionMemory.remember(choices);
    if (started.engine) return showHandedOver(engine, { projectId: started.projectId, name: started.name }, started.engine, started.notices);
    const ref = { projectId: started.projectId, name: started.name };
    ctx.log.info(`loop ${started.name} started (${kind}, model ${choices.model ?? 'default'}${choices.variant ? ` (${choices.variant})` : ''}, max ${choices.maxIterations} iterations, ${describeConfinement(started.confinement)})`);
    await announceStarted(engine, ref, started.notices);
    return { status: 'started', loop: ref, notices: started.notices };
  }

  /** The loop runs in another process (the data folder's engine): the window shows it as any loop another process supervises. */
  async function showHandedOver(engine: ForgeEngine, ref: LoopRef, by: EngineInfo, notices: string[]): Promise<CommandResult> {
    ctx.log.info(`loop ${ref.name} handed to the data folder's engine, process ${by.pid} (${by.kind}); that process supervises it`);
    await announceStarted(engine, ref, notices, by);
    return { status: 'started', loop: ref, notices, supervisorPid: by.pid };
  }

  /**
   * Tells the user a loop started — in this window, or in the data folder's engine `by` — with
   * what its start said, and opens its worktree as configured. Adding a folder may restart the
   * extensions, which would stop the loops this window drives: then the worktree is offered instead.
   */
  async function announceStarted(engine: ForgeEngine, ref: LoopRef, notices: readonly string[], by?: EngineInfo): Promise<void> {
    for (const notice of notices) {
      // Running unconfined is a warning, never a passing note, whichever process supervises the loop.
      if (/\bUNCONFINED\b/.test(notice)) void ctx.notifier.warn(vscode.l10n.t('Forge ({0}): {1}', ref.name, notice));
      else void ctx.notifier.info(vscode.l10n.t('Forge ({0}): {1}', ref.name, notice));
    }
    ctx.loops.refresh();
    await ctx.loops.refreshNow();
    const row = engine.runtime.get(ref);
    let opened: Awaited<ReturnType<typeof ctx.worktreeFolders.open>> = 'none';
    if (row?.worktreeDir) {
      try {
        opened = await ctx.worktreeFolders.open(ref, row.worktreeDir, ctx.settings.get()['forge.openWorktree'], { deferWhileDriving: true });
      } catch (error) {
        ctx.notifier.error(vscode.l10n.t('Forge could not open the worktree of {0}', ref.name), error);
      }
    }
    const worktree = opened === 'deferred' && row?.worktreeDir ? row.worktreeDir : undefined;
    let message: string;
    if (by) {
      message = vscode.l10n.t('Forge: loop "{0}" started in the Forge engine of process {1} ({2}), which supervises it; this window shows it.', ref.name, by.pid, by.kind);
      if (worktree) message = `${message} ${vscode.l10n.t('Its worktree: {0}.', worktree)}`;
    } else {
      message = worktree
        ? vscode.l10n.t('Forge: loop "{0}" started in {1}. Forge offers to add it to the workspace when the loop ends: adding a folder to this single-folder window would restart the extensions and stop the loop.', ref.name, worktree)
        : vscode.l10n.t('Forge: loop "{0}" started.', ref.name);
    }
    const dashboard = vscode.l10n.t('Open Dashboard');
    const showLog = vscode.l10n.t('Show Log');
    const newWindow = vscode.l10n.t('Open in New Window');
    void ctx.notifier.info(message, ...(worktree ? [dashboard, newWindow] : [dashboard, showLog])).then((choice) => {
      if (choice === dashboard) void ctx.dashboard.show({ loop: ref });
      if (choice === showLog) ctx.channel.show(true);
      if (choice === newWindow && worktree) void vscode.commands.executeCommand('vscode.openFolder', vscode.Uri.file(worktree), { forceNewWindow: true });
    });
  }

  async function openSession(repoPath: string, plan: PlanInput, model: string | null): Promise<CommandResult> {
    if (plan.text.length > MAX_SESSION_PROMPT) {
      return refused(ctx, 'no-plan', vscode.l10n.t('The plan from {0} is too long to hand to an opencode session as its prompt (over {1} kB). Run it as a loop instead.', plan.source, MAX_SESSION_PROMPT / 1000));
    }
    const core = await ctx.loadCore();
    const binary = core.resolveOpencodeBinary({ configuredPath: ctx.settings.get()['forge.opencode.binaryPath'] || undefined });
    const terminal = vscode.window.createTerminal({
      name: `Forge: ${plan.source}`,
      cwd: repoPath,
      shellPath: binary,
      shellArgs: [repoPath, '--prompt', plan.text, ...(model ? ['--model', model] : [])],
      env: await ctx.apiKeys.environment(),
      iconPath: new vscode.ThemeIcon('terminal'),
    });
    terminal.show();
    ctx.log.info(`opened an opencode session on ${plan.source} in ${repoPath}`);
    return { status: 'done', detail: vscode.l10n.t('session') };
  }


  registerForgeCommand(ctx, 'forge.executePlan', vscode.l10n.t('Execute Plan'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('execute a plan'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('execute a plan'));
    if (missing) return missing;
    const noOpencode = await refuseWithoutOpencode(ctx);
    if (noOpencode) return noOpencode;
    const { explicit, args, interactive } = parseArgs(arg);
    const plan = await resolvePlanInput(explicit, interactive);
    if (!plan) {
      return interactive
        ? { status: 'cancelled' }
        : refused(ctx, 'no-plan', vscode.l10n.t('Forge: Execute Plan needs a plan: open a markdown plan in the editor, or pass planText / planFile.'));
    }
    if (plan.text.trim() === '') return refused(ctx, 'no-plan', vscode.l10n.t('{0} is empty: write the plan first.', plan.source));
    // The validation of `forge check` and the plan's diagnostics: errors refuse, warnings are shown.
    const validationRoot = (plan.uri && vscode.workspace.getWorkspaceFolder(plan.uri)?.uri.fsPath) ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const problems = planProblemsIn(plan.text, plan.source, validationRoot);
    const errors = problems.filter((p) => p.severity === 'error');
    if (errors.length > 0) {
      const list = errors.map((p) => vscode.l10n.t('line {0}: {1}', p.line + 1, p.message)).join('\n');
      return refused(ctx, 'bad-plan', vscode.l10n.t('Forge: {0} cannot run as written; fix it first (the Problems view shows where):\n{1}', plan.source, list));
    }
    const warnings = problems.filter((p) => p.severity === 'warning');
    for (const w of warnings) ctx.log.warn(`${plan.source}: line ${w.line + 1}: ${w.message}`);
    if (warnings.length > 0) {
      // Warnings never stop a start (as with forge run): they are said once, and the plan's
      // diagnostics show where; the user can still cancel at the next question.
      const showProblems = vscode.l10n.t('Show Problems');
      void ctx.notifier
        .warn(vscode.l10n.t('Forge: {0} has {1} warning(s); the loop starts anyway. First: line {2}: {3}', plan.source, warnings.length, warnings[0]!.line + 1, warnings[0]!.message), showProblems)
        .then((choice) => {
          if (choice === showProblems) void vscode.commands.executeCommand('workbench.actions.view.problems');
        });
    }
    const engine = await engineWithProgress(ctx);
    const folder = ctx.projects.startFolder(engine, plan.uri);
    if (!folder) return refused(ctx, 'no-repository', vscode.l10n.t('Forge runs loops from your own repository folder, and only loop worktrees are open: open the repository folder.'));
    const choices = await choose(engine, 'plan', folder.uri.fsPath, args, interactive, planSize(plan.text));
    if (!choices) return { status: 'cancelled' };
    if (choices.mode === 'session') {
      await ctx.executionMemory.remember(choices);
      return openSession(folder.uri.fsPath, plan, choices.model);
    }
    return startLoop(engine, 'plan', folder.uri.fsPath, choices, { plan, ...(args.name ? { name: args.name } : {}) });
  });

  registerForgeCommand(ctx, 'forge.executeGoal', vscode.l10n.t('Execute Goal'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('execute a goal'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('execute a goal'));
    if (missing) return missing;
    const noOpencode = await refuseWithoutOpencode(ctx);
    if (noOpencode) return noOpencode;
    const { args, interactive } = parseArgs(arg);
    const goal =
      args.goal ??
      (interactive
        ? await vscode.window.showInputBox({
            title: vscode.l10n.t('Forge: Execute Goal'),
            prompt: vscode.l10n.t('What should the agents achieve? Forge codes and audits until an audit leaves no open finding.'),
            placeHolder: vscode.l10n.t('e.g. Make `npm test` pass without skipping tests'),
            ignoreFocusOut: true,
            validateInput: (v) => (v.trim() === '' ? vscode.l10n.t('Say what the agent should achieve.') : undefined),
          })
        : undefined);
    if (goal === undefined) return interactive ? { status: 'cancelled' } : refused(ctx, 'no-plan', vscode.l10n.t('Forge: Execute Goal needs a goal (pass { goal }).'));
    const checks = args.checks ?? (interactive ? await askGoalContract() : {});
    if (checks === undefined) return { status: 'cancelled' };
    // The runtime refuses the same; saying it here keeps the start from half-happening.
    const problems = goalContractProblems(checks);
    if (problems) return refused(ctx, 'bad-checks', vscode.l10n.t('Forge: {0}', problems));
    const engine = await engineWithProgress(ctx);
    const folder = ctx.projects.startFolder(engine);
    if (!folder) return refused(ctx, 'no-repository', vscode.l10n.t('Forge runs loops from your own repository folder, and only loop worktrees are open: open the repository folder.'));
    const choices = await choose(engine, 'goal', folder.uri.fsPath, { ...args, mode: 'loop' }, interactive, { kind: 'goal', chars: goal.length, sections: 0 });
    if (!choices) return { status: 'cancelled' };
    return startLoop(engine, 'goal', folder.uri.fsPath, choices, { goal, checks, ...(args.name ? { name: args.name } : {}) });
  });
}

/** A plan's size for the cost estimate (a plan Forge cannot parse gets no estimate; the start says why). */
function planSize(text: string): PlanSize | undefined {
  try {
    const plan = parsePlan(text);
    return { kind: 'plan', chars: plan.text.length, sections: plan.sections.length };
  } catch {
    return undefined;
  }
}
