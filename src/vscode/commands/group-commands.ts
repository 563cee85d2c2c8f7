import * as vscode from 'vscode';
import type { FeatureGroupService, FeatureGroupView, GroupBudget, GroupRef } from '../../core/groups/group-types';
import { DEFAULT_GROUP_CONCURRENCY, MAX_GROUP_CONCURRENCY, MIN_GROUP_CONCURRENCY } from '../../core/vocabulary/group-vocabulary';
import { askBudgetAmount, executionFlowSteps, runExecutionFlow, type ExecutionFlowDeps } from '../execution-flow';
import type { ForgeContext } from '../forge-context';
import { suggestedGroupBudget, groupSpendText } from '../group-budget-text';
import { createGroupNotifications } from '../group-notifications';
import { groupServiceOf } from '../loops-model';
import { resolvePlanInput } from '../plan-source';
import { refuseIfUntrusted } from '../trust';
import { engineWithProgress, groupRefFrom, noWorkspace, refused, registerForgeCommand, type CommandResult } from './command-support';
import { modelCatalog, refuseWithoutOpencode } from './execution-support';

/**
 * Non-interactive use of Execute PRD (tests, keybindings with arguments): what is given is not
 * asked; `interactive` (default false when an object is given) decides whether the rest is.
 */
export interface ExecutePrdArgs {
  readonly prdText?: string;
  readonly prdFile?: string | vscode.Uri;
  /** Group id; default: derived from the PRD's title. */
  readonly id?: string;
  readonly model?: string | null;
  readonly auditorModel?: string | null;
  readonly sandbox?: boolean;
  readonly maxConcurrent?: number;
  readonly budget?: Partial<GroupBudget>;
  /** Launch right after the split instead of offering the review first. */
  readonly launch?: boolean;
  readonly interactive?: boolean;
}

/** Launch / Resume Group with arguments: the group, and (Resume) the budget to continue with. */
export interface GroupCommandArgs {
  readonly projectId: string;
  readonly id?: string;
  readonly groupId?: string;
  readonly maxConcurrent?: number;
  readonly budget?: Partial<GroupBudget>;
}

const GROUP_STEPS = 3; // cap, money budget, token budget

/** A refusal of the group service (GroupError) says what is wrong and how to fix it: shown as it is. */
const isGroupError = (error: unknown): error is Error & { code: string } => error instanceof Error && error.name === 'GroupError';

function parsePrdArgs(arg: unknown): { explicit: { uri?: vscode.Uri; text?: string }; args: ExecutePrdArgs; interactive: boolean } {
  if (arg instanceof vscode.Uri) return { explicit: { uri: arg }, args: {}, interactive: true };
  if (arg && typeof arg === 'object') {
    const args = arg as ExecutePrdArgs;
    const uri = typeof args.prdFile === 'string' ? vscode.Uri.file(args.prdFile) : args.prdFile;
    return { explicit: { ...(uri ? { uri } : {}), ...(args.prdText !== undefined ? { text: args.prdText } : {}) }, args, interactive: args.interactive ?? false };
  }
  return { explicit: {}, args: {}, interactive: true };
}

async function askConcurrency(title: string, current: number): Promise<number | undefined> {
  const value = await vscode.window.showInputBox({
    title,
    prompt: vscode.l10n.t('How many of the group\'s feature loops may run at once ({0} to {1})? Features start as the ones they depend on complete.', MIN_GROUP_CONCURRENCY, MAX_GROUP_CONCURRENCY),
    value: String(current),
    ignoreFocusOut: true,
    validateInput: (v) =>
      /^\d+$/.test(v.trim()) && Number(v) >= MIN_GROUP_CONCURRENCY && Number(v) <= MAX_GROUP_CONCURRENCY
        ? undefined
        : vscode.l10n.t('A whole number from {0} to {1}', MIN_GROUP_CONCURRENCY, MAX_GROUP_CONCURRENCY),
  });
  return value === undefined ? undefined : Number(value.trim());
}

/** The group budget's two boxes (money, tokens); undefined when the user pressed Escape. */
async function askGroupBudget(titles: readonly [string, string], current: GroupBudget, why: string): Promise<GroupBudget | undefined> {
  const money = await askBudgetAmount({
    title: titles[0],
    kind: 'money',
    prompt: vscode.l10n.t('Group budget in money, over all its loops together (for example 5.00); empty = none. {0}', why),
    current: current.money,
  });
  if (money === undefined) return undefined;
  const tokens = await askBudgetAmount({
    title: titles[1],
    kind: 'tokens',
    prompt: vscode.l10n.t('Group budget in tokens, over all its loops together (for example 2000000); empty = none. {0}', why),
    current: current.tokens,
  });
  if (tokens === undefined) return undefined;
  return { money, tokens };
}

export function registerGroupCommands(ctx: ForgeContext): void {
  const notifications = createGroupNotifications(ctx);
  ctx.extension.subscriptions.push(notifications);

  async function service(): Promise<FeatureGroupService | CommandResult> {
    const engine = await engineWithProgress(ctx);
    const groups = groupServiceOf(engine);
    return groups ?? refused(ctx, 'unavailable', vscode.l10n.t('Forge: this engine has no feature groups.'));
  }
  const refusal = (error: unknown): CommandResult => {
    if (isGroupError(error)) return refused(ctx, 'bad-group', vscode.l10n.t('Forge: {0}', error.message));
    throw error;
  };

  /** The group a command acts on: from its argument, else picked among the groups `filter` accepts. */
  async function resolveGroup(groups: FeatureGroupService, arg: unknown, filter: (g: FeatureGroupView) => boolean, placeHolder: string): Promise<FeatureGroupView | undefined | 'none'> {
    await ctx.loops.start();
    const ref = groupRefFrom(arg);
    if (ref) return groups.get(ref) ?? 'none';
    const candidates = ctx.loops.projects().flatMap((p) => groups.list(p.projectId)).filter(filter);
    if (candidates.length === 0) return 'none';
    if (candidates.length === 1) return candidates[0];
    const picked = await vscode.window.showQuickPick(
      candidates.map((group) => ({ group, label: group.ref.id, description: group.title, detail: vscode.l10n.t('{0} · {1}', group.status, groupSpendText(group.budget, group.spend)) })),
      { placeHolder },
    );
    return picked?.group;
  }

  async function launch(groups: FeatureGroupService, ref: GroupRef, options: { maxConcurrent?: number; budget?: Partial<GroupBudget> } = {}): Promise<CommandResult> {
    let view: FeatureGroupView;
    try {
      view = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: launching group {0}…', ref.id) }, () => groups.launch(ref, options));
    } catch (error) {
      return refusal(error);
    }
    ctx.loops.refresh();
    const openDashboard = vscode.l10n.t('Open Dashboard');
    void ctx.notifier
      .info(vscode.l10n.t('Forge: group "{0}" launched: {1} features, at most {2} loops at once.', ref.id, view.features.length, view.maxConcurrent), openDashboard)
      .then((choice) => {
        if (choice === openDashboard) void ctx.dashboard.show({ group: ref });
      });
    return { status: 'done', detail: { group: view.ref, status: view.status } };
  }

  registerForgeCommand(ctx, 'forge.executePrd', vscode.l10n.t('Execute PRD'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('execute a PRD'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('execute a PRD'));
    if (missing) return missing;
    const noOpencode = await refuseWithoutOpencode(ctx);
    if (noOpencode) return noOpencode;
    const { explicit, args, interactive } = parsePrdArgs(arg);
    const prd = await resolvePlanInput(explicit, interactive, {
      title: vscode.l10n.t('Forge: Execute PRD — which PRD?'),
      clipboard: vscode.l10n.t('$(clippy) PRD from the clipboard'),
      openLabel: vscode.l10n.t('Execute PRD'),
    });
    if (!prd) return interactive ? { status: 'cancelled' } : refused(ctx, 'no-plan', vscode.l10n.t('Forge: Execute PRD needs a PRD: open a markdown PRD in the editor, or pass prdText / prdFile.'));
    if (prd.text.trim() === '') return refused(ctx, 'no-plan', vscode.l10n.t('{0} is empty: write the PRD first.', prd.source));
    const groups = await service();
    if (!('split' in groups)) return groups;
    const engine = await ctx.engine.get();
    const folder = ctx.projects.startFolder(engine, prd.uri);
    if (!folder) return refused(ctx, 'no-repository', vscode.l10n.t('Forge runs loops from your own repository folder, and only loop worktrees are open: open the repository folder.'));
    const repoPath = folder.uri.fsPath;
    const settings = ctx.settings.get();
    const title = vscode.l10n.t('Forge: Execute PRD');

    // The model and sandbox steps of Execute Plan; a group's loops run as loops with the loop defaults.
    const flow: ExecutionFlowDeps = {
      kind: 'plan',
      title,
      interactive,
      given: {
        mode: 'loop',
        variant: null,
        maxIterations: settings['forge.loop.maxIterations'],
        ...(args.model !== undefined ? { model: args.model } : {}),
        ...(args.auditorModel !== undefined ? { auditorModel: args.auditorModel } : {}),
        ...(args.sandbox !== undefined ? { sandbox: args.sandbox } : {}),
      },
      defaults: { model: settings['forge.model'] || null, auditorModel: settings['forge.auditorModel'] || null, maxIterations: settings['forge.loop.maxIterations'], sandbox: settings['forge.sandbox.enabled'] },
      memory: ctx.executionMemory,
      catalog: () => modelCatalog(ctx, engine, repoPath),
      sandboxAvailability: () => ctx.statusBar.probe(engine),
      extraSteps: GROUP_STEPS,
    };
    const choices = await runExecutionFlow(flow);
    if (!choices) return { status: 'cancelled' };
    const base = executionFlowSteps(flow);
    const total = base + GROUP_STEPS;
    const stepTitle = (n: number) => `${title} (${base + n}/${total})`;

    const defaultCap = settings['forge.groups.maxConcurrentLoops'] ?? DEFAULT_GROUP_CONCURRENCY;
    const maxConcurrent = args.maxConcurrent ?? (interactive ? await askConcurrency(stepTitle(1), defaultCap) : defaultCap);
    if (maxConcurrent === undefined) return { status: 'cancelled' };
    const settingsBudget: GroupBudget = {
      money: settings['forge.groups.budget.money'] > 0 ? settings['forge.groups.budget.money'] : null,
      tokens: settings['forge.groups.budget.tokens'] > 0 ? settings['forge.groups.budget.tokens'] : null,
    };
    const given: GroupBudget = { money: args.budget?.money !== undefined ? args.budget.money : settingsBudget.money, tokens: args.budget?.tokens !== undefined ? args.budget.tokens : settingsBudget.tokens };
    const budget =
      interactive && args.budget === undefined
        ? await askGroupBudget([stepTitle(2), stepTitle(3)], given, vscode.l10n.t('At 80 % Forge warns; at 100 % the group pauses: nothing new starts and its loops pause at their next hand-over.'))
        : given;
    if (!budget) return { status: 'cancelled' };
    await ctx.executionMemory.remember(choices);

    let view: FeatureGroupView;
    try {
      view = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: splitting {0} into features', prd.source), cancellable: true },
        (progress, token) => {
          const abort = new AbortController();
          const cancellation = token.onCancellationRequested(() => abort.abort());
          return groups
            .split({
              repoPath,
              prdText: prd.text,
              prdSource: prd.source,
              ...(args.id ? { id: args.id } : {}),
              ...(choices.model ? { model: choices.model, loopModel: choices.model } : {}),
              ...(choices.auditorModel ? { auditorModel: choices.auditorModel } : {}),
              ...(choices.sandbox !== null ? { sandbox: choices.sandbox } : {}),
              maxConcurrent,
              budget,
              signal: abort.signal,
              onProgress: (line) => {
                progress.report({ message: line });
                ctx.log.info(`split ${prd.source}: ${line}`);
              },
            })
            .finally(() => cancellation.dispose());
        },
      );
    } catch (error) {
      if (isGroupError(error) && error.code === 'interrupted') return { status: 'cancelled' };
      return refusal(error);
    }
    ctx.loops.refresh();
    ctx.log.info(`group ${view.ref.id} split from ${prd.source}: ${view.features.map((f) => f.id).join(', ')}`);
    if (args.launch) return launch(groups, view.ref);

    // The review: each feature's plan opens (edits count at launch); the group waits in review.
    for (const feature of view.features) {
      await vscode.window.showTextDocument(vscode.Uri.file(feature.planPath), { preview: false, preserveFocus: true });
    }
    const launchAction = vscode.l10n.t('Launch Group');
    const reviewAction = vscode.l10n.t('Review First');
    void ctx.notifier
      .info(
        vscode.l10n.t('Forge: {0} split into {1} features ({2}) as group "{3}". Their plans are open for review in {4}; edits count when the group launches.', prd.source, view.features.length, view.features.map((f) => f.id).join(', '), view.ref.id, view.reviewDir),
        launchAction,
        reviewAction,
      )
      .then((choice) => {
        if (choice === launchAction) void vscode.commands.executeCommand('forge.launchGroup', view.ref);
      });
    return { status: 'done', detail: { group: view.ref, status: view.status, features: view.features.map((f) => f.id) } };
  });

  registerForgeCommand(ctx, 'forge.launchGroup', vscode.l10n.t('Launch Group'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('launch a feature group'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('launch a feature group'));
    if (missing) return missing;
    const noOpencode = await refuseWithoutOpencode(ctx);
    if (noOpencode) return noOpencode;
    const groups = await service();
    if (!('split' in groups)) return groups;
    const group = await resolveGroup(groups, arg, (g) => g.status === 'review', vscode.l10n.t('Which group should Forge launch?'));
    if (group === 'none') return refused(ctx, 'no-group', vscode.l10n.t('Forge: no feature group waits for launch (Execute PRD splits one).'));
    if (!group) return { status: 'cancelled' };
    const given = (arg ?? {}) as Partial<GroupCommandArgs>;
    return launch(groups, group.ref, { ...(given.maxConcurrent !== undefined ? { maxConcurrent: given.maxConcurrent } : {}), ...(given.budget ? { budget: given.budget } : {}) });
  });

  registerForgeCommand(ctx, 'forge.resumeGroup', vscode.l10n.t('Resume Group'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('resume a feature group'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('resume a feature group'));
    if (missing) return missing;
    const noOpencode = await refuseWithoutOpencode(ctx);
    if (noOpencode) return noOpencode;
    const groups = await service();
    if (!('split' in groups)) return groups;
    const group = await resolveGroup(groups, arg, (g) => g.status === 'paused', vscode.l10n.t('Which paused group should Forge resume?'));
    if (group === 'none') return refused(ctx, 'no-group', vscode.l10n.t('Forge: no feature group is paused.'));
    if (!group) return { status: 'cancelled' };
    const given = (arg ?? {}) as Partial<GroupCommandArgs>;
    let budget = given.budget;
    if (budget === undefined && group.pauseReason === 'budget_reached') {
      // Spent: ask for more, the suggested figure pre-filled; the service refuses a budget without room.
      const title = vscode.l10n.t('Forge: Resume Group {0}', group.ref.id);
      const asked = await askGroupBudget(
        [`${title} (1/2)`, `${title} (2/2)`],
        suggestedGroupBudget(group.budget, group.spend),
        vscode.l10n.t('The group has {0}; give it more room to continue.', groupSpendText(group.budget, group.spend)),
      );
      if (!asked) return { status: 'cancelled' };
      budget = asked;
    }
    let view: FeatureGroupView;
    try {
      view = await groups.resume(group.ref, { ...(budget ? { budget } : {}), ...(given.maxConcurrent !== undefined ? { maxConcurrent: given.maxConcurrent } : {}) });
    } catch (error) {
      return refusal(error);
    }
    notifications.resumed(group.ref);
    ctx.loops.refresh();
    void ctx.notifier.info(vscode.l10n.t('Forge: group "{0}" resumed ({1}).', group.ref.id, groupSpendText(view.budget, view.spend)));
    return { status: 'done', detail: { group: view.ref, status: view.status } };
  });

  registerForgeCommand(ctx, 'forge.cancelGroup', vscode.l10n.t('Cancel Group'), async (arg) => {
    const missing = noWorkspace(ctx, vscode.l10n.t('cancel a feature group'));
    if (missing) return missing;
    const groups = await service();
    if (!('split' in groups)) return groups;
    const group = await resolveGroup(groups, arg, (g) => g.status === 'running' || g.status === 'paused' || g.status === 'review', vscode.l10n.t('Which group should Forge cancel?'));
    if (group === 'none') return refused(ctx, 'no-group', vscode.l10n.t('Forge: no feature group to cancel.'));
    if (!group) return { status: 'cancelled' };
    let view: FeatureGroupView;
    try {
      view = await groups.cancel(group.ref);
    } catch (error) {
      return refusal(error);
    }
    ctx.loops.refresh();
    void ctx.notifier.info(vscode.l10n.t('Forge: group "{0}" cancelled; its worktrees and branches are kept.', group.ref.id));
    return { status: 'done', detail: { group: view.ref, status: view.status } };
  });
}
