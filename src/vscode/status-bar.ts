import * as vscode from 'vscode';
import type { ForgeEngine } from './engine-contract';
import type { ForgeLog } from './log';
import type { LoopsModel } from './loops-model';
import type { SettingsAccessor } from './settings-accessor';
import { confinementOf } from '../core/sandbox/confinement';
import { nextStepsOfSummary } from './next-step-labels';

export interface SandboxAvailability {
  readonly available: boolean;
  readonly driver: string | null;
  readonly reason: string | null;
}

export interface StatusBarSnapshot {
  readonly sandbox: { readonly text: string; readonly tooltip: string; readonly command: string | undefined; readonly enabled: boolean; readonly availability: SandboxAvailability | null };
  readonly running: { readonly text: string; readonly visible: boolean; readonly command: string | undefined };
}

/**
 * Text and tooltip of the sandbox item: a pure function of the setting, what the engine found and
 * the confinement of the loops running now. The item speaks of NEW loops (the setting): each loop
 * keeps the confinement it started with, so a running loop that is unconfined is named beside it
 * ("· 1 running UNCONFINED") and the item is a warning; it never says "sandboxed" alone next to
 * an unconfined loop (issue 29 item 6).
 */
export function sandboxItemView(
  enabled: boolean,
  availability: SandboxAvailability | null,
  runningUnconfined: readonly string[] = [],
): { text: string; tooltip: string; disabled: boolean; warning: boolean } {
  const view = newLoopsView(enabled, availability);
  if (runningUnconfined.length === 0) return view;
  return {
    ...view,
    text: vscode.l10n.t('{0} · {1} running UNCONFINED', view.text, runningUnconfined.length),
    tooltip: vscode.l10n.t('{0}\n\nRunning now UNCONFINED (each loop keeps the confinement it started with): {1}.', view.tooltip, runningUnconfined.join(', ')),
    warning: true,
  };
}

function newLoopsView(enabled: boolean, availability: SandboxAvailability | null): { text: string; tooltip: string; disabled: boolean; warning: boolean } {
  const unconfined = vscode.l10n.t('Their agents\' commands run on this machine as you and can write outside the worktree; Forge keeps its secrets out of their environment and refuses git push, but only a sandbox stops a determined agent.');
  if (!enabled) {
    return {
      text: vscode.l10n.t('$(warning) New loops: unconfined (sandbox off)'),
      tooltip: vscode.l10n.t('New Forge loops run UNCONFINED: the sandbox is turned off (forge.sandbox.enabled). {0} Click to turn the sandbox on.', unconfined),
      disabled: false,
      warning: true,
    };
  }
  if (availability && !availability.available) {
    return {
      text: vscode.l10n.t('$(warning) New loops: unconfined (sandbox unavailable)'),
      tooltip: vscode.l10n.t('New Forge loops run UNCONFINED: Forge cannot sandbox loops on this machine: {0}. {1} Install bubblewrap (Linux), Docker or Podman, or set forge.sandbox.required to refuse unconfined loops.', availability.reason ?? vscode.l10n.t('no sandbox driver is available'), unconfined),
      disabled: true,
      warning: true,
    };
  }
  const driver = availability?.driver ? ` (${availability.driver})` : '';
  return {
    text: vscode.l10n.t('$(vm) New loops: sandboxed{0}', driver),
    tooltip: vscode.l10n.t('New Forge loops run their agents\' commands in a sandbox{0}: only the worktree is writable, no secret of Forge or opencode is reachable.{1} Click to turn it off.', driver, availability ? '' : vscode.l10n.t(' (The sandbox driver is checked on first use.)')),
    disabled: false,
    warning: false,
  };
}

/** The running-loops item: how many run, and how many wait for the user (issue 29 item 7). */
export function loopsItemView(running: number, waiting: readonly string[]): { text: string; tooltip: string; visible: boolean } {
  const parts: string[] = [];
  if (running > 0) parts.push(running === 1 ? vscode.l10n.t('$(sync~spin) Forge: 1 loop running') : vscode.l10n.t('$(sync~spin) Forge: {0} loops running', running));
  if (waiting.length > 0) parts.push(running > 0 ? vscode.l10n.t('$(bell-dot) {0} waiting', waiting.length) : vscode.l10n.t('$(bell-dot) Forge: {0} waiting', waiting.length));
  return {
    text: parts.join(' · '),
    tooltip: waiting.length > 0 ? vscode.l10n.t('Loops waiting for you: {0}. Show the Loop Explorer', waiting.join(', ')) : vscode.l10n.t('Show the Loop Explorer'),
    visible: parts.length > 0,
  };
}

export const TOGGLE_SANDBOX_COMMAND = 'forge.toggleSandbox';
export const FOCUS_LOOP_EXPLORER_COMMAND = 'forge.loopExplorer.focus';

/**
 * The sandbox toggle (the default for new loops) and the running-loops indicator. Shown
 * from activation on with the raw setting; the driver is only probed once the engine runs.
 */
export class ForgeStatusBar implements vscode.Disposable {
  private readonly sandboxItem = vscode.window.createStatusBarItem('forge.sandbox', vscode.StatusBarAlignment.Right, 100);
  private readonly runningItem = vscode.window.createStatusBarItem('forge.running', vscode.StatusBarAlignment.Left, 50);
  private availability: SandboxAvailability | null = null;
  private runningVisible = false;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly settings: SettingsAccessor,
    private readonly model: LoopsModel,
    engineStarted: vscode.Event<ForgeEngine>,
    private readonly log: ForgeLog,
  ) {
    this.sandboxItem.name = vscode.l10n.t('Forge Sandbox');
    this.sandboxItem.command = TOGGLE_SANDBOX_COMMAND;
    this.runningItem.name = vscode.l10n.t('Forge Loops');
    this.runningItem.command = FOCUS_LOOP_EXPLORER_COMMAND;
    this.subscriptions.push(
      settings.onDidChange(() => this.render()),
      model.onDidChange(() => this.render()),
      engineStarted((engine) => void this.probe(engine)),
    );
    this.render();
    this.sandboxItem.show();
  }

  /** Asks the engine which sandbox driver is available (no-op before the engine exists). */
  async probe(engine: ForgeEngine): Promise<SandboxAvailability> {
    try {
      this.availability = await engine.sandboxStatus();
    } catch (error) {
      this.availability = { available: false, driver: null, reason: error instanceof Error ? error.message : String(error) };
    }
    this.log.info(`sandbox: ${this.availability.available ? `driver ${this.availability.driver}` : `unavailable (${this.availability.reason})`}`);
    this.render();
    return this.availability;
  }

  sandboxEnabled(): boolean {
    return this.settings.isLoaded() ? this.settings.get()['forge.sandbox.enabled'] : this.settings.rawBoolean('forge.sandbox.enabled', true);
  }

  render(): void {
    const live = this.model.summaries().filter((s) => s.loop.status === 'running' || s.loop.status === 'starting');
    const view = sandboxItemView(this.sandboxEnabled(), this.availability, live.filter((s) => !confinementOf(s.loop).sandboxed).map((s) => s.loop.name));
    this.sandboxItem.text = view.text;
    this.sandboxItem.tooltip = view.tooltip;
    this.sandboxItem.color = undefined;
    this.sandboxItem.backgroundColor = view.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;

    // A feature group's loops are the group's to tell and resume (as the notices do).
    const inGroups = new Set(this.model.groups().flatMap((g) => g.features.flatMap((f) => (f.loopName ? [`${g.ref.projectId}/${f.loopName}`] : []))));
    const waiting = this.model.summaries().filter((s) => nextStepsOfSummary(s).waiting && !inGroups.has(`${s.loop.projectId}/${s.loop.name}`)).map((s) => s.loop.name);
    const loops = loopsItemView(live.length, waiting);
    this.runningItem.text = loops.text;
    this.runningItem.tooltip = loops.tooltip;
    this.runningVisible = loops.visible;
    if (loops.visible) this.runningItem.show();
    else this.runningItem.hide();
  }

  snapshot(): StatusBarSnapshot {
    return {
      sandbox: {
        text: this.sandboxItem.text,
        tooltip: String(this.sandboxItem.tooltip ?? ''),
        command: typeof this.sandboxItem.command === 'string' ? this.sandboxItem.command : this.sandboxItem.command?.command,
        enabled: this.sandboxEnabled(),
        availability: this.availability,
      },
      running: {
        text: this.runningItem.text,
        visible: this.runningVisible,
        command: typeof this.runningItem.command === 'string' ? this.runningItem.command : this.runningItem.command?.command,
      },
    };
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.sandboxItem.dispose();
    this.runningItem.dispose();
  }
}
