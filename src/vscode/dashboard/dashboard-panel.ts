import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ForgeEngine } from '../engine-contract';
import type { ForgeLog } from '../log';
import type { LoopsModel } from '../loops-model';
import { buildDashboardState } from './dashboard-model';
import { LiveViewBridge } from './live-bridge';
import type { DashboardState, DashboardViewState, GroupKey, HostToWebview, LoopAction, LoopKey, RenderProbe, WebviewToHost } from './protocol';
import { inertLine } from '../../core/text/inert-text';

export const DASHBOARD_VIEW_TYPE = 'forge.dashboard';

export interface DashboardDeps {
  readonly extensionUri: vscode.Uri;
  readonly model: LoopsModel;
  readonly engine: () => Promise<ForgeEngine>;
  readonly log: ForgeLog;
  readonly onError: (what: string, error: unknown) => void;
}

export function dashboardHtml(webview: vscode.Webview, extensionUri: vscode.Uri, nonce: string): string {
  const script = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, 'dist', 'webview.js'));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, 'media', 'dashboard.css'));
  const csp = [
    "default-src 'none'",
    `img-src ${webview.cspSource} data:`,
    `style-src ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Forge Dashboard</title>
</head>
<body>
<main id="app" aria-live="polite"><p class="muted">Loading Forge loops…</p></main>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
}

/**
 * The dashboard webview: one panel, restored after a reload by the serializer (the webview
 * keeps the selected loop in its own state). Re-renders from the loops model's change
 * events while visible; a hidden panel catches up when it is shown again.
 */
export class Dashboard implements vscode.WebviewPanelSerializer<DashboardViewState>, vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private panelSubscriptions: vscode.Disposable[] = [];
  private selected: LoopKey | null = null;
  /** A feature group selected in the Loop Explorer (cleared when a loop outside it is picked). */
  private selectedGroup: GroupKey | null = null;
  private focusFindingId: number | null = null;
  private stale = false;
  private lastState: DashboardState | undefined;
  private readonly probes = new Map<number, (probe: RenderProbe) => void>();
  private nextProbe = 1;
  private readonly subscriptions: vscode.Disposable[] = [];
  private readonly ready = new vscode.EventEmitter<void>();
  /** The engine once loaded (the live view follows its feed). */
  private engineLoaded: ForgeEngine | undefined;
  private readonly live: LiveViewBridge;

  constructor(private readonly deps: DashboardDeps) {
    this.live = new LiveViewBridge(() => this.engineLoaded, (message) => this.post(message), deps.onError);
    this.subscriptions.push(deps.model.onDidChange(() => this.update()), this.live);
  }

  async show(selection: { loop?: LoopKey; group?: GroupKey; findingId?: number } = {}): Promise<void> {
    if (selection.loop) this.selected = selection.loop;
    if (selection.group) {
      this.selectedGroup = { projectId: selection.group.projectId, id: selection.group.id };
      if (!selection.loop) this.selected = null;
    } else if (selection.loop) this.selectedGroup = null;
    this.focusFindingId = selection.findingId ?? null;
    await this.deps.model.start();
    if (this.panel) {
      this.panel.reveal(undefined, false);
    } else {
      const panel = vscode.window.createWebviewPanel(DASHBOARD_VIEW_TYPE, vscode.l10n.t('Forge Dashboard'), vscode.ViewColumn.Active, this.webviewOptions());
      this.adopt(panel);
    }
    await this.update(true);
  }

  /** WebviewPanelSerializer: a dashboard that was open before the window reloaded. */
  async deserializeWebviewPanel(panel: vscode.WebviewPanel, state: DashboardViewState | undefined): Promise<void> {
    this.selected = state?.selected ?? null;
    this.selectedGroup = state?.selectedGroup ?? null;
    this.deps.log.info(`restoring the dashboard${this.selected ? ` on loop ${this.selected.name}` : ''}`);
    panel.webview.options = this.webviewOptions();
    this.adopt(panel);
    try {
      await this.deps.model.start();
    } catch (error) {
      this.deps.onError(vscode.l10n.t('Forge could not restore its dashboard'), error);
      return;
    }
    // Not awaited: VS Code loads a restored webview only once this method has returned, and a
    // message posted to it before then is delivered only after that, so awaiting the post here
    // would never end (the panel stayed blank). The webview's 'ready' brings the state anyway.
    void this.update(true);
    this.deps.log.info('dashboard restored');
  }

  isOpen(): boolean {
    return this.panel !== undefined;
  }

  state(): DashboardState | undefined {
    return this.lastState;
  }

  /** Asks the webview what it rendered (for tests): resolves with the webview's own account. */
  async probe(timeoutMs = 15_000): Promise<RenderProbe> {
    if (!this.panel) throw new Error(vscode.l10n.t('The dashboard is not open.'));
    const requestId = this.nextProbe++;
    const result = new Promise<RenderProbe>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.probes.delete(requestId);
        reject(new Error(vscode.l10n.t('The dashboard webview did not answer the probe.')));
      }, timeoutMs);
      this.probes.set(requestId, (probe) => {
        clearTimeout(timer);
        resolve(probe);
      });
    });
    await this.post({ type: 'probe', requestId });
    return result;
  }

  private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      enableFindWidget: true,
      localResourceRoots: [vscode.Uri.joinPath(this.deps.extensionUri, 'dist'), vscode.Uri.joinPath(this.deps.extensionUri, 'media')],
    };
  }

  private adopt(panel: vscode.WebviewPanel): void {
    this.panel = panel;
    panel.iconPath = vscode.Uri.joinPath(this.deps.extensionUri, 'media', 'forge.svg');
    const nonce = randomBytes(16).toString('base64');
    panel.webview.html = dashboardHtml(panel.webview, this.deps.extensionUri, nonce);
    this.panelSubscriptions = [
      panel.webview.onDidReceiveMessage((message: WebviewToHost) => void this.onMessage(message)),
      panel.onDidChangeViewState(() => {
        if (panel.visible && this.stale) void this.update();
      }),
      panel.onDidDispose(() => {
        this.live.detach();
        for (const s of this.panelSubscriptions) s.dispose();
        this.panelSubscriptions = [];
        this.panel = undefined;
      }),
    ];
  }

  private async update(force = false): Promise<void> {
    const panel = this.panel;
    if (!panel) return;
    if (!panel.visible && !force) {
      this.stale = true;
      return;
    }
    this.stale = false;
    try {
      const engine = await this.deps.engine();
      this.engineLoaded = engine;
      const projects = this.deps.model.projects();
      const state = buildDashboardState({
        repos: engine.repos,
        projectIds: projects.map((p) => p.projectId),
        selected: this.selected,
        focusFindingId: this.focusFindingId,
        isSupervising: (ref) => engine.runtime.isSupervising(ref),
        groups: this.deps.model.groups(),
        selectedGroup: this.selectedGroup,
        emptyMessage: !vscode.workspace.workspaceFolders?.length
          ? vscode.l10n.t('Open a folder with a git repository to run Forge loops.')
          : projects.length === 0
            ? vscode.l10n.t('None of the workspace folders is a git repository with a commit: Forge runs loops in git worktrees.')
            : vscode.l10n.t('No loops yet. Run "Forge: Execute Plan" on a markdown plan.'),
      });
      this.selected = state.selected;
      this.lastState = state;
      await this.post({ type: 'state', state });
      // A reloaded webview (force) lost what it kept: it gets the live view's snapshot again.
      await this.live.select(state.selected, force);
    } catch (error) {
      this.deps.onError(vscode.l10n.t('Forge could not update its dashboard'), error);
    }
  }

  private async post(message: HostToWebview): Promise<void> {
    await this.panel?.webview.postMessage(message);
  }

  private async onMessage(message: WebviewToHost): Promise<void> {
    try {
      switch (message.type) {
        case 'ready':
          this.deps.log.debug('dashboard webview ready');
          this.ready.fire();
          await this.update(true);
          return;
        case 'select':
          this.selected = message.loop;
          // A loop of the selected group keeps the group selected; any other loop leaves it.
          if (this.selectedGroup && !this.lastState?.group?.features.some((f) => f.loop?.name === message.loop.name && f.loop.projectId === message.loop.projectId)) this.selectedGroup = null;
          this.focusFindingId = null;
          await this.update(true);
          return;
        case 'openFile':
          await this.openFile(message.loop, message.file, message.line);
          return;
        case 'loopAction': {
          const commands: Record<LoopAction, string> = {
            cancel: 'forge.cancelLoop',
            message: 'forge.messageAgent',
            restart: 'forge.restartLoop',
            forceRestart: 'forge.forceRestartLoop',
            openWorktree: 'forge.openWorktree',
            showDiff: 'forge.showLoopDiff',
            accept: 'forge.acceptLoop',
            review: 'forge.reviewLoop',
            sendReview: 'forge.review.send',
          };
          const command = commands[message.action];
          await vscode.commands.executeCommand(command, message.loop);
          return;
        }
        case 'groupAction': {
          const command = { launch: 'forge.launchGroup', resume: 'forge.resumeGroup', cancel: 'forge.cancelGroup' }[message.action];
          await vscode.commands.executeCommand(command, { projectId: message.group.projectId, id: message.group.id });
          return;
        }
        case 'dismissFinding':
          await vscode.commands.executeCommand('forge.dismissFinding', { projectId: message.loop.projectId, loopName: message.loop.name, findingId: message.findingId });
          return;
        case 'liveSession':
          await this.live.request(message.loop, message.sessionId, message.full);
          return;
        case 'probeResult':
          this.probes.get(message.requestId)?.(message.probe);
          this.probes.delete(message.requestId);
          return;
      }
    } catch (error) {
      this.deps.onError(vscode.l10n.t('The dashboard action failed'), error);
    }
  }

  private async openFile(loop: LoopKey, file: string, line: number): Promise<void> {
    const engine = await this.deps.engine();
    const row = engine.repos.loops.get(loop.projectId, loop.name);
    if (!row?.worktreeDir) throw new Error(vscode.l10n.t('Loop "{0}" has no worktree to open {1} in.', loop.name, file));
    const target = path.join(row.worktreeDir, file);
    // A sibling folder shares the worktree's name as a prefix (`…/loop` and `…/loop2`): compare by relative path.
    const inside = path.relative(row.worktreeDir, target);
    if (inside === '' || inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside)) throw new Error(vscode.l10n.t('{0} is outside the loop\'s worktree.', inertLine(file)));
    const position = new vscode.Position(Math.max(0, line - 1), 0);
    await vscode.window.showTextDocument(vscode.Uri.file(target), { selection: new vscode.Range(position, position), viewColumn: vscode.ViewColumn.Beside });
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    for (const s of this.panelSubscriptions) s.dispose();
    this.ready.dispose();
    this.panel?.dispose();
  }
}
