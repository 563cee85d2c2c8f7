import { existsSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ForgeLog } from './log';
import type { LoopsModel } from './loops-model';
import { isInsideFolder } from './projects';

export type OpenWorktreeMode = 'add-folder' | 'new-window' | 'never';

/**
 * Whether adding a folder makes VS Code enter a new (untitled) workspace: in a single-folder
 * or empty window it does, and that restarts every extension, which stops the loops this
 * window drives (microsoft/vscode#165010). In a multi-root workspace it does not.
 */
export function addingFolderRestartsExtensions(): boolean {
  return vscode.workspace.workspaceFile === undefined;
}

/**
 * Loop worktrees as workspace folders (setting `forge.openWorktree`). A worktree folder
 * gets a per-loop watcher on its directory; when the worktree is cleaned up (the loop's
 * `cleanupWorktree`, or removed by hand) the folder leaves the workspace. In a window where
 * adding a folder would restart the extensions, the folder is offered when the loop ends.
 */
export class WorktreeFolders implements vscode.Disposable {
  private readonly watchers = new Map<string, vscode.Disposable>();
  private readonly deferred = new Map<string, { loopName: string; worktreeDir: string }>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly model: LoopsModel,
    private readonly worktreesRoot: () => string | undefined,
    private readonly log: ForgeLog,
    /**
     * What makes a worktree unsafe to hand to VS Code's git (its `.git` file rewritten, a
     * repository of the agent's inside, the git dir's config or hooks changed; issue 26): one
     * sentence each, none when it is safe.
     */
    private readonly unsafeBecause: (worktreeDir: string) => Promise<string[]> = async () => [],
  ) {
    this.subscriptions.push(
      model.onDidChange(() => this.pruneMissing()),
      model.onRuntimeEvent((event) => {
        if (event.type === 'loop.ended') void this.offerDeferred(`${event.loop.projectId}/${event.loop.name}`);
      }),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.syncWatchers()),
    );
  }

  /** Loops this window drives right now (they stop if the extensions restart). */
  drivenHere(): number {
    return this.model.summaries().filter((s) => s.supervisedHere && (s.loop.status === 'running' || s.loop.status === 'starting')).length;
  }

  /**
   * Opens a loop's worktree as the setting says. `deferred`: adding it now would restart the
   * extensions and stop running loops, so it is offered when the loop ends.
   */
  async open(
    loop: { projectId: string; name: string },
    worktreeDir: string,
    mode: OpenWorktreeMode,
    options: { deferWhileDriving?: boolean } = {},
  ): Promise<'added' | 'present' | 'new-window' | 'deferred' | 'none'> {
    if (mode === 'never') return 'none';
    await this.refuseUnsafe(worktreeDir);
    const uri = vscode.Uri.file(worktreeDir);
    if (mode === 'new-window') {
      await vscode.commands.executeCommand('vscode.openFolder', uri, { forceNewWindow: true });
      return 'new-window';
    }
    const folders = vscode.workspace.workspaceFolders ?? [];
    if (folders.some((f) => f.uri.fsPath === uri.fsPath)) return 'present';
    if (options.deferWhileDriving && addingFolderRestartsExtensions() && this.drivenHere() > 0) {
      this.deferred.set(`${loop.projectId}/${loop.name}`, { loopName: loop.name, worktreeDir });
      this.log.info(`worktree ${worktreeDir}: added to the workspace when loop ${loop.name} ends (adding it now would restart the extensions)`);
      return 'deferred';
    }
    const added = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        sub.dispose();
        resolve(false);
      }, 15_000);
      const sub = vscode.workspace.onDidChangeWorkspaceFolders((e) => {
        if (e.added.some((f) => f.uri.fsPath === uri.fsPath)) {
          clearTimeout(timer);
          sub.dispose();
          resolve(true);
        }
      });
    });
    const ok = vscode.workspace.updateWorkspaceFolders(folders.length, 0, { uri, name: `Forge: ${loop.name}` });
    if (!ok) throw new Error(vscode.l10n.t('VS Code refused to add {0} to the workspace.', worktreeDir));
    if (!(await added)) throw new Error(vscode.l10n.t('VS Code did not add {0} to the workspace.', worktreeDir));
    this.log.info(`added worktree ${worktreeDir} to the workspace`);
    return 'added';
  }

  /** Throws, saying why, when the worktree fails the invariants that make opening it safe. */
  private async refuseUnsafe(worktreeDir: string): Promise<void> {
    const problems = await this.unsafeBecause(worktreeDir);
    if (problems.length === 0) return;
    this.log.warn(`worktree ${worktreeDir}: not opened: ${problems.join('; ')}`);
    throw new Error(vscode.l10n.t('Forge will not open {0}: {1}. VS Code\'s git would run what the loop\'s agent put there; inspect the folder outside VS Code or remove the worktree.', worktreeDir, problems.join('; ')));
  }

  private async offerDeferred(key: string): Promise<void> {
    const pending = this.deferred.get(key);
    if (!pending) return;
    this.deferred.delete(key);
    if (!existsSync(pending.worktreeDir)) return;
    try {
      await this.refuseUnsafe(pending.worktreeDir);
    } catch (error) {
      void vscode.window.showErrorMessage((error as Error).message);
      return;
    }
    const still = this.drivenHere();
    const choice = await vscode.window.showInformationMessage(
      still === 0
        ? vscode.l10n.t('Forge: loop "{0}" ended. Add its worktree to the workspace?', pending.loopName)
        : vscode.l10n.t('Forge: loop "{0}" ended. Add its worktree to the workspace? This restarts the extensions and stops the {1} loop(s) this window still drives.', pending.loopName, still),
      vscode.l10n.t('Add to Workspace'),
      vscode.l10n.t('Open in New Window'),
    );
    if (choice === vscode.l10n.t('Add to Workspace')) {
      vscode.workspace.updateWorkspaceFolders((vscode.workspace.workspaceFolders ?? []).length, 0, { uri: vscode.Uri.file(pending.worktreeDir), name: `Forge: ${pending.loopName}` });
    } else if (choice === vscode.l10n.t('Open in New Window')) {
      await vscode.commands.executeCommand('vscode.openFolder', vscode.Uri.file(pending.worktreeDir), { forceNewWindow: true });
    }
  }

  /** Workspace folders that are Forge worktrees. */
  worktreeFolders(): vscode.WorkspaceFolder[] {
    const root = this.worktreesRoot();
    if (!root) return [];
    return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file' && isInsideFolder(root, f.uri.fsPath) && f.uri.fsPath !== root);
  }

  /** Removes worktree folders whose directory is gone. */
  pruneMissing(): void {
    const gone = this.worktreeFolders().filter((f) => !existsSync(f.uri.fsPath));
    // Highest index first: removing shifts the later folders.
    for (const folder of gone.sort((a, b) => b.index - a.index)) {
      this.log.info(`worktree ${folder.uri.fsPath} was removed: taking it out of the workspace`);
      vscode.workspace.updateWorkspaceFolders(folder.index, 1);
    }
    this.syncWatchers();
  }

  private syncWatchers(): void {
    const current = new Set<string>();
    for (const folder of this.worktreeFolders()) {
      const dir = folder.uri.fsPath;
      current.add(dir);
      if (this.watchers.has(dir)) continue;
      // The loop's own scope: a watcher on its worktree directory, gone with the folder.
      const watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(vscode.Uri.file(path.dirname(dir)), path.basename(dir)), true, true, false);
      watcher.onDidDelete(() => this.pruneMissing());
      this.watchers.set(dir, watcher);
    }
    for (const [dir, watcher] of this.watchers) {
      if (current.has(dir)) continue;
      watcher.dispose();
      this.watchers.delete(dir);
    }
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    for (const w of this.watchers.values()) w.dispose();
    this.watchers.clear();
  }
}
