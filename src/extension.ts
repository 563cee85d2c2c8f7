// Forge's composition root: the one place where the extension's services are created and
// wired. Activation is cheap and lazy: it registers commands, views and status-bar items,
// but loads no engine code, opens no database and starts no process; the engine is created
// on the first use of a feature (a command, the Loop Explorer becoming visible, the dashboard).
import { SetupProgress } from './vscode/setup-progress';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { createApiKeyStore } from './vscode/api-keys';
import type { ForgeExtensionApi, TreeSnapshotNode } from './vscode/api';
import { chatApiOf, registerForgeChat } from './vscode/chat/forge-chat';
import { registerApiKeyCommands } from './vscode/commands/api-key-commands';
import { registerExecuteCommands } from './vscode/commands/execute-commands';
import { registerGroupCommands } from './vscode/commands/group-commands';
import { registerFindingCommands } from './vscode/commands/finding-commands';
import { registerLoopCommands } from './vscode/commands/loop-commands';
import { registerPlanCommands } from './vscode/commands/plan-commands';
import { registerSandboxCommands } from './vscode/commands/sandbox-commands';
import { createCoreLoader } from './vscode/core-loader';
import { Dashboard, DASHBOARD_VIEW_TYPE } from './vscode/dashboard/dashboard-panel';
import { createEngineHost } from './vscode/engine-host';
import { createExecutionMemory } from './vscode/execution-flow';
import { FINDING_SCHEME, FindingDocumentProvider } from './vscode/finding-document';
import { FindingCodeActions, FindingsDiagnostics } from './vscode/findings-diagnostics';
import type { ForgeContext } from './vscode/forge-context';
import { createForgeLog, type ForgeLog } from './vscode/log';
import { BASE_SCHEME, BaseContentProvider } from './vscode/loop-diff';
import { LoopExplorer, LOOP_EXPLORER_VIEW_ID, toTreeItem } from './vscode/loop-explorer';
import { buildLoopDetails, loopNodeTooltip, buildSectionNodes, type LoopDetailNode, type LoopTreeNode } from './vscode/loop-tree-model';
import { describeAmendment } from './core/loop/plan-amendments';
import { createLoopsModel } from './vscode/loops-model';
import { LoopNotices } from './vscode/loop-notices';
import { createNotifier } from './vscode/notifier';
import { PlanCodeLenses, PlanDiagnostics } from './vscode/plan-diagnostics';
import { createWorkspaceProjects } from './vscode/projects';
import { createSettingsAccessor } from './vscode/settings-accessor';
import { ForgeStatusBar } from './vscode/status-bar';
import { WorktreeFolders } from './vscode/worktree-folders';

// The one piece of module state: `deactivate` gets no context, yet must await the engine's
// close (loops this window drives end with `shutdown`, the database is flushed).
let disposeEngine: (() => Promise<void>) | undefined;

export function activate(context: vscode.ExtensionContext): ForgeExtensionApi {
  const started = performance.now();
  const disposable = <T extends vscode.Disposable>(d: T): T => (context.subscriptions.push(d), d);

  const channel = disposable(vscode.window.createOutputChannel('Forge', { log: true }));
  const log = createForgeLog(channel);
  const notifier = createNotifier(log.child('ui'), () => channel.show(true));
  const distDir = vscode.Uri.joinPath(context.extensionUri, 'dist').fsPath;
  const loadCore = createCoreLoader(distDir);

  const settings = disposable(
    createSettingsAccessor({
      loadResolver: async () => {
        const core = await loadCore();
        return (read, forgeSection) => core.resolveSettings(read, core.flattenSettingKeys('forge', forgeSection));
      },
      log: log.child('settings'),
      report: (problem) => void notifier.warn(problem.message, vscode.l10n.t('Open Settings')).then((choice) => {
        if (choice) void vscode.commands.executeCommand('workbench.action.openSettings', problem.suggestion ?? problem.key);
      }),
    }),
  );
  const apiKeys = createApiKeyStore(context.secrets, context.globalState);
  const engine = createEngineHost({
    loadCore,
    settings,
    log: log.child('engine-host'),
    assetsDir: distDir,
    containerDir: path.join(context.extensionUri.fsPath, 'container'),
    apiKeyEnv: () => apiKeys.environment(),
    notify: (message) => void notifier.info(message),
  });
  disposeEngine = () => engine.dispose();
  const projects = disposable(createWorkspaceProjects(log.child('projects')));
  const onError = (what: string, error: unknown) => notifier.error(what, error);
  const loops = disposable(createLoopsModel({ engine, projects, log: log.child('loops'), onError }));

  // A loop's sections with the auditor's amendments, read from the store when its Sections detail is expanded.
  const readSections: SectionReader = (node) => {
    const core = engine.peek();
    if (!core || !node.sectionsOf) return [];
    const { projectId, name } = node.sectionsOf;
    const amended = new Map<number, string[]>();
    for (const view of core.repos.planAmendments.listByLoop(projectId, name).map((a) => describeAmendment(a))) {
      for (const change of view.changes) if (change.kind !== 'removed') amended.set(change.index, [...(amended.get(change.index) ?? []), view.rationale]);
    }
    return buildSectionNodes(node.id, core.repos.sectionPlans.list(projectId, name), amended);
  };
  const explorer = disposable(new LoopExplorer(loops, onError, readSections));
  const treeView = disposable(vscode.window.createTreeView(LOOP_EXPLORER_VIEW_ID, { treeDataProvider: explorer, showCollapseAll: true }));
  disposable(
    loops.onDidChange(() => {
      const running = loops.summaries().filter((s) => s.loop.status === 'running' || s.loop.status === 'starting').length;
      treeView.badge = running > 0 ? { value: running, tooltip: running === 1 ? vscode.l10n.t('1 Forge loop running') : vscode.l10n.t('{0} Forge loops running', running) } : undefined;
    }),
  );

  const diagnostics = disposable(new FindingsDiagnostics(loops, () => engine.peek(), log.child('diagnostics')));
  disposable(vscode.languages.registerCodeActionsProvider({ scheme: 'file' }, new FindingCodeActions(diagnostics), FindingCodeActions.metadata));
  const statusBar = disposable(new ForgeStatusBar(settings, loops, engine.onDidStart, log.child('status-bar')));
  const worktreeFolders = disposable(new WorktreeFolders(loops, () => engine.peek() && path.join(engine.peek()!.dataDir, 'worktrees'), log.child('worktrees'), async (dir) => {
    const e = engine.peek();
    return e ? (await e.worktrees.verifyWorktree(dir)).map((p) => p.detail) : [];
  }));
  const dashboard = disposable(new Dashboard({ extensionUri: context.extensionUri, model: loops, engine: () => engine.get(), log: log.child('dashboard'), onError }));
  disposable(vscode.window.registerWebviewPanelSerializer(DASHBOARD_VIEW_TYPE, dashboard));
  disposable(vscode.workspace.registerTextDocumentContentProvider(BASE_SCHEME, new BaseContentProvider(() => engine.get())));
  const findingDocuments = disposable(new FindingDocumentProvider(() => engine.get(), loops.onDidChange));
  disposable(vscode.workspace.registerTextDocumentContentProvider(FINDING_SCHEME, findingDocuments));
  disposable(new PlanDiagnostics(log.child('plans')));
  disposable(new PlanCodeLenses());

  const ctx: ForgeContext = {
    extension: context,
    channel,
    log,
    notifier,
    settings,
    loadCore,
    engine,
    projects,
    loops,
    diagnostics,
    statusBar,
    worktreeFolders,
    dashboard,
    apiKeys,
    executionMemory: createExecutionMemory(context.globalState),
  };
  registerExecuteCommands(ctx);
  registerLoopCommands(ctx);
  registerPlanCommands(ctx);
  registerSandboxCommands(ctx);
  registerFindingCommands(ctx);
  registerApiKeyCommands(ctx);
  registerGroupCommands(ctx);
  logRuntimeEvents(ctx, log.child('loop'));
  disposable(new LoopNotices(ctx));
  // `vscode.chat` is read through the API object, never assumed: builds without it activate all the same.
  const chatParticipant = registerForgeChat(chatApiOf({ chat: vscode.chat }), {
    log: log.child('chat'),
    extensionUri: context.extensionUri,
    loops: async () => (await loops.start(), loops.summaries()),
    executeCommand: (command, ...args) => vscode.commands.executeCommand(command, ...args),
    commandExists: async (command) => (await vscode.commands.getCommands(true)).includes(command),
    openPlan: () => {
      // The chat view has the focus: the plan is in the visible editors, the active one first.
      const editors = [vscode.window.activeTextEditor, ...vscode.window.visibleTextEditors];
      return editors.find((e) => e?.document.languageId === 'markdown' && e.document.uri.scheme === 'file')?.document.uri;
    },
  });
  if (chatParticipant) disposable(chatParticipant);

  const activationMs = performance.now() - started;
  log.info(`activated in ${activationMs.toFixed(1)} ms (engine not started)`);
  return createApi(ctx, activationMs, readSections, chatParticipant !== undefined);
}

export async function deactivate(): Promise<void> {
  // Loops this window drives end with `shutdown`; the engine closes its database and servers.
  await disposeEngine?.();
  disposeEngine = undefined;
}

function logRuntimeEvents(ctx: ForgeContext, log: ForgeLog): void {
  // The setup phase of a loop (issue 27): a progress notification while it runs.
  const setupProgress = new SetupProgress();
  ctx.extension.subscriptions.push(setupProgress, ctx.loops.onRuntimeEvent((event) => setupProgress.onEvent(event)));
  ctx.extension.subscriptions.push(
    ctx.loops.onRuntimeEvent((event) => {
      const name = event.loop.name;
      switch (event.type) {
        case 'loop.phase':
          log.info(`${name}: ${event.from ?? 'start'} → ${event.to} (${event.event}, iteration ${event.iteration}${event.sectionIndex === null ? '' : `, section ${event.sectionIndex + 1}`})`);
          break;
        case 'loop.setup':
          log.info(`${name}: setup ${event.status} ${event.step}${event.durationMs !== undefined ? ` (${(event.durationMs / 1000).toFixed(1)} s)` : ''}`);
          if (event.output && event.status === 'failed') log.warn(`${name}: setup output:\n${event.output}`);
          break;
        case 'loop.setup_output':
          log.debug(`${name}: setup | ${event.line}`);
          break;
        case 'loop.ended':
          log.info(`${name}: ended ${event.status} (${typeof event.reason === 'string' ? event.reason : event.reason.kind}) after ${event.iterations} iterations`);
          // The notification with the next steps is loop-notices.ts's.
          break;
        case 'loop.notice':
          log[event.level === 'error' ? 'error' : event.level === 'warning' ? 'warn' : 'info'](`${name}: ${event.message}`);
          break;
        case 'loop.budget': {
          // The cost governor: a warning at 80 %; at 100 % the loop paused and the user decides.
          log.warn(`${name}: ${event.message}`);
          if (event.level === 'warning') {
            void ctx.notifier.warn(vscode.l10n.t('Forge: loop "{0}": {1}', name, event.message), vscode.l10n.t('Open Dashboard')).then((choice) => {
              if (choice) void ctx.dashboard.show({ loop: event.loop });
            });
            break;
          }
          // The pause itself is told with its next steps when the loop ends paused (loop-notices.ts).
          break;
        }
        case 'loop.commit':
          log.info(`${name}: committed ${event.sha.slice(0, 8)} ${event.message.split('\n')[0]}`);
          break;
        case 'loop.supervision_lost':
          log.warn(`${name}: another window or process took over this loop; this window only displays it now`);
          break;
        default:
          log.debug(`${name}: ${event.type}`);
      }
    }),
  );
}

type SectionReader = (node: LoopDetailNode) => LoopDetailNode[];

function snapshotOf(node: LoopTreeNode, readSections: SectionReader): TreeSnapshotNode {
  const item = toTreeItem(node);
  const children =
    node.kind === 'group'
      ? node.loops
      : node.kind === 'featureGroup'
        ? node.children
        : node.kind === 'loop'
          ? buildLoopDetails(node)
          : node.kind === 'detail' && node.sectionsOf
            ? readSections(node)
            : [];
  return {
    id: node.id,
    label: String(typeof item.label === 'object' ? item.label.label : item.label),
    description: typeof item.description === 'string' ? item.description : undefined,
    tooltip: node.kind === 'loop' ? loopNodeTooltip(node) : typeof item.tooltip === 'string' ? item.tooltip : undefined,
    icon: item.iconPath instanceof vscode.ThemeIcon ? item.iconPath.id : undefined,
    contextValue: item.contextValue,
    children: children.map((child) => snapshotOf(child, readSections)),
  };
}

function createApi(ctx: ForgeContext, activationMs: number, readSections: SectionReader, chatParticipantRegistered: boolean): ForgeExtensionApi {
  return {
    activationMs,
    engine: () => ctx.engine.peek(),
    startEngine: async () => {
      const engine = await ctx.engine.get();
      await ctx.loops.refreshNow();
      return engine;
    },
    setTestEnvironment: (env) => ctx.engine.setExtraEnvironment(env),
    treeSnapshot: () => ctx.loops.tree().map((node) => snapshotOf(node, readSections)),
    onDidChangeLoops: (listener) => ctx.loops.onDidChange(listener),
    statusBar: () => ctx.statusBar.snapshot(),
    notifications: () => ctx.notifier.recent(),
    dashboard: () => ({ open: ctx.dashboard.isOpen(), state: ctx.dashboard.state(), probe: () => ctx.dashboard.probe() }),
    diagnosticFileCount: () => ctx.diagnostics.fileCount(),
    logUri: ctx.extension.logUri,
    chatParticipantRegistered,
  };
}
