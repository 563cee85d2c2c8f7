import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ForgeEngine } from './engine-contract';
import type { ForgeLog } from './log';

export interface WorkspaceProject {
  readonly projectId: string;
  readonly repoDir: string;
}

/**
 * The repositories of the open workspace folders, as Forge projects. A loop worktree
 * added as a folder belongs to the same project as its repository (same git common dir),
 * so it does not add a project.
 */
export interface WorkspaceProjects {
  list(engine: ForgeEngine): Promise<WorkspaceProject[]>;
  /** The folder a new loop starts from: the one holding `hint`, else the first folder that is not a loop worktree. */
  startFolder(engine: ForgeEngine, hint?: vscode.Uri): vscode.WorkspaceFolder | undefined;
}

export function isInsideFolder(parent: string, child: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

export function createWorkspaceProjects(log: ForgeLog): WorkspaceProjects & vscode.Disposable {
  // folder path -> project, or null when the folder is not a git repository.
  const cache = new Map<string, Promise<WorkspaceProject | null>>();
  const subscription = vscode.workspace.onDidChangeWorkspaceFolders(() => cache.clear());

  const projectOf = (engine: ForgeEngine, folder: string) => {
    let entry = cache.get(folder);
    if (!entry) {
      entry = engine.runtime.projectOf(folder).then(
        (p) => ({ projectId: p.projectId, repoDir: p.repoDir }),
        (error: unknown) => {
          log.debug(`${folder} is not a Forge project: ${error instanceof Error ? error.message : String(error)}`);
          return null;
        },
      );
      cache.set(folder, entry);
    }
    return entry;
  };

  return {
    async list(engine) {
      const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file');
      const found = await Promise.all(folders.map((f) => projectOf(engine, f.uri.fsPath)));
      const unique = new Map<string, WorkspaceProject>();
      for (const p of found) if (p && !unique.has(p.projectId)) unique.set(p.projectId, p);
      return [...unique.values()];
    },
    startFolder(engine, hint) {
      const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file');
      const worktreesDir = path.join(engine.dataDir, 'worktrees');
      const own = folders.filter((f) => !isInsideFolder(worktreesDir, f.uri.fsPath));
      if (hint?.scheme === 'file') {
        const holding = own.find((f) => isInsideFolder(f.uri.fsPath, hint.fsPath));
        if (holding) return holding;
      }
      return own[0];
    },
    dispose: () => subscription.dispose(),
  };
}
