/**
 * Every failure a user can meet in the workspace module carries one of these
 * codes, so callers (VS Code host, CLI, loop runtime) can branch on the code and
 * show the message as-is: the message always says what is wrong and how to fix it.
 */
export type WorkspaceErrorCode =
  | 'invalid_loop_name'
  | 'path_not_found'
  | 'not_a_directory'
  | 'not_a_git_repository'
  | 'not_a_work_tree'
  | 'bare_repository'
  | 'no_commits'
  | 'unsafe_repository'
  | 'invalid_base_commit'
  | 'branch_exists'
  | 'branch_checked_out'
  | 'branch_namespace_taken'
  | 'worktree_path_exists'
  | 'worktree_outside_data_dir'
  | 'worktree_inside_repository'
  | 'worktree_add_failed'
  | 'missing_worktree'
  | 'worktree_mismatch'
  | 'worktree_dirty'
  | 'commit_failed'
  | 'data_dir_invalid'
  | 'data_dir_too_long'
  | 'data_dir_unwritable'
  | 'git_not_found'
  | 'git_failed';

export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';

  constructor(
    readonly code: WorkspaceErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export function isWorkspaceError(value: unknown, code?: WorkspaceErrorCode): value is WorkspaceError {
  return value instanceof WorkspaceError && (code === undefined || value.code === code);
}
