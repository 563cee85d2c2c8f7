import { existsSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { LoopRow } from '../core/storage/repositories/loops-repository';
import type { ForgeEngine } from './engine-contract';

/** Read-only documents of a file at the loop's base commit (or at its branch, when the worktree is gone). */
export const BASE_SCHEME = 'forge-base';

interface BaseQuery {
  projectId: string;
  loop: string;
  /** A commit-ish: the base commit, or the loop branch. */
  ref: string;
}

export function baseUri(loop: Pick<LoopRow, 'projectId' | 'name'>, ref: string, relativePath: string): vscode.Uri {
  const query: BaseQuery = { projectId: loop.projectId, loop: loop.name, ref };
  return vscode.Uri.from({ scheme: BASE_SCHEME, path: `/${relativePath.split(path.sep).join('/')}`, query: JSON.stringify(query) });
}

export class BaseContentProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly engine: () => Promise<ForgeEngine>) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const query = JSON.parse(uri.query) as BaseQuery;
    const engine = await this.engine();
    const loop = engine.repos.loops.get(query.projectId, query.loop);
    if (!loop?.repoDir) return '';
    const content = await engine.worktrees.readFileAtBase({ repoDir: loop.repoDir, baseCommit: query.ref }, uri.path.replace(/^\//, ''));
    // null: the file did not exist there (added or deleted by the loop): an empty side.
    return content ?? '';
  }
}

/**
 * Opens VS Code's multi-file diff: every file the loop changed, base commit on the left,
 * the worktree (or, once it is gone, the loop branch) on the right.
 */
export async function showLoopDiff(engine: ForgeEngine, loop: LoopRow): Promise<number> {
  if (!loop.repoDir || !loop.baseCommit || !loop.branch) {
    throw new Error(vscode.l10n.t('Loop "{0}" has no worktree yet (it did not get past its start), so there is nothing to compare.', loop.name));
  }
  const live = loop.worktreeDir !== null && existsSync(loop.worktreeDir);
  const changes = await engine.worktrees.diffAgainstBase(
    { repoDir: loop.repoDir, branch: loop.branch, baseCommit: loop.baseCommit, ...(live ? { worktreeDir: loop.worktreeDir! } : {}) },
    { includeUncommitted: live },
  );
  if (changes.length === 0) return 0;
  const branchRef = `refs/heads/${loop.branch}`;
  const resources: [vscode.Uri, vscode.Uri | undefined, vscode.Uri | undefined][] = changes.map((change) => {
    const right = live ? vscode.Uri.file(path.join(loop.worktreeDir!, change.path)) : baseUri(loop, branchRef, change.path);
    const left = baseUri(loop, loop.baseCommit!, change.oldPath ?? change.path);
    if (change.status === 'A') return [right, undefined, right];
    if (change.status === 'D') return [left, left, undefined];
    return [right, left, right];
  });
  const title = `Forge: ${loop.name} (${loop.baseBranch ?? loop.baseCommit.slice(0, 8)} ↔ ${loop.branch})`;
  try {
    await vscode.commands.executeCommand('vscode.changes', title, resources);
  } catch {
    // Older hosts without the multi-file diff: one diff editor per file, the first one opened.
    const [resource, left, right] = resources[0]!;
    await vscode.commands.executeCommand('vscode.diff', left ?? baseUri(loop, loop.baseCommit, '/dev/null'), right ?? resource, title);
  }
  return changes.length;
}
