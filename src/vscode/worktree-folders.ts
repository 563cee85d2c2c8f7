import { existsSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ForgeLog } from './log';
import type { LoopsModel } from './loops-model';
import { isInsideFolder } from './projects';

export type OpenWorktreeMode = 'add-folder' | 'new-window' | 'never';

/**
 * Loop worktrees as workspace folders (setting `forge.openWorktree`). A worktree folder
 * gets a per-loop watcher on its directory; when the worktree is cleaned up (the loop's
 * `cleanupWorktree`, or removed by hand) the folder leaves the workspace.
 */
export class WorktreeFolders implements vscode.Disposable {
  private readonly watchers = new Map<string, vscode.Disposable>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly model: LoopsModel,
    private readonly worktreesRoot: () => string | undefined,
    private readonly log: ForgeLog,
  ) {
    this.subscriptions.push(
      model.onDidChange(() => this.pruneMissing()),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.syncWatchers()),
    );
  }

  /** Opens a loop's worktree as the setting says. Returns what it did. */
  async open(loopName: string, worktreeDir: string, mode: OpenWorktreeMode): Promise<'added' | 'present' | 'new-window' | 'none'> {
    if (mode === 'never') return 'none';
    const uri = vscode.Uri.file(worktreeDir);
    if (mode === 'new-window') {
      await vscode.commands.executeCommand('vscode.openFolder', uri, { forceNewWindow: true });
      return 'new-window';
    }
    const folders = vscode.workspace.workspaceFolders ?? [];
    if (folders.some((f) => f.uri.fsPath === uri.fsPath)) return 'present';
    const added = new Promise<void>((resolve) => {
      const sub = vscode.workspace.onDidChangeWorkspaceFolders((e) => {
        if (e.added.some((f) => f.uri.fsPath === uri.fsPath)) {
          sub.dispose();
          resolve();
        }
      });
      setTimeout(() => {
        sub.dispose();
        resolve();
      }, 10_000);
    });
    const ok = vscode.workspace.updateWorkspaceFolders(folders.length, 0, { uri, name: `Forge: ${loopName}` });
    if (!ok) throw new Error(`VS Code refused to add ${worktreeDir} to the workspace.`);
    await added;
    this.log.info(`added worktree ${worktreeDir} to the workspace`);
    return 'added';
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
