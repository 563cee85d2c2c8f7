/**
 * A loop's setup phase in VS Code (issue 27): a progress notification from the setup's start to
 * its end, naming the step that runs. Fed by the engine's `loop.setup` events.
 */
import * as vscode from 'vscode';
import type { LoopRuntimeEvent } from '../core/loop/runtime-types';
import { inertLine } from '../core/text/inert-text';

export class SetupProgress implements vscode.Disposable {
  /** Per loop key: the running notification's reporter and its end. */
  private readonly running = new Map<string, { report(message: string): void; end(): void }>();

  constructor(private readonly withProgress: typeof vscode.window.withProgress = (o, t) => vscode.window.withProgress(o, t)) {}

  onEvent(event: LoopRuntimeEvent): void {
    if (event.type === 'loop.ended' || event.type === 'loop.supervision_lost') {
      this.finish(this.key(event.loop));
      return;
    }
    if (event.type !== 'loop.setup') return;
    const key = this.key(event.loop);
    if (event.step === 'setup') {
      if (event.status === 'started') this.begin(key, event.loop.name);
      else this.finish(key);
      return;
    }
    if (event.status === 'started') this.running.get(key)?.report(inertLine(event.step));
  }

  private key(loop: { projectId: string; name: string }): string {
    return `${loop.projectId}\u0000${loop.name}`;
  }

  private begin(key: string, name: string): void {
    this.finish(key);
    let end!: () => void;
    const done = new Promise<void>((resolve) => (end = resolve));
    let report: (message: string) => void = () => undefined;
    this.running.set(key, { report: (m) => report(m), end: () => end() });
    void this.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: preparing the worktree of loop "{0}"', inertLine(name)) }, (progress) => {
      report = (message) => progress.report({ message });
      return done;
    });
  }

  private finish(key: string): void {
    const r = this.running.get(key);
    this.running.delete(key);
    r?.end();
  }

  dispose(): void {
    for (const key of [...this.running.keys()]) this.finish(key);
  }
}
