/**
 * opencode writes into the project folder it serves (seen with 1.18.33):
 * - it adds `"$schema"` to every project config file that lacks it (`opencode.json[c]` at the
 *   root and in `.opencode/`), and
 * - in every `.opencode/` folder it writes a `.gitignore` (which ignores itself, `package.json`,
 *   lock files and `node_modules`) and tries to install `@opencode-ai/plugin` there.
 * None of that may end up in a loop's commits. The `.opencode/` writes ignore themselves unless
 * the user tracks those files; config files without `$schema` would show up as modified. This
 * marks exactly those tracked files `skip-worktree` in the loop worktree's own index (each git
 * worktree has its own index, so the user's checkout is not affected), so `git add -A` and
 * `git commit -a` leave opencode's rewrites out.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createGitRunner } from '../workspace/git-runner';
import { createWorktreeGitDirs } from '../workspace/worktree-git-dirs';

const CONFIG_FILES = ['opencode.json', 'opencode.jsonc', '.opencode/opencode.json', '.opencode/opencode.jsonc'];
const OPENCODE_FOLDER_FILES = ['.opencode/.gitignore', '.opencode/package.json', '.opencode/bun.lock', '.opencode/package-lock.json'];

export interface WorktreeGuardResult {
  /** Files marked skip-worktree. */
  protectedFiles: string[];
}

export async function keepOpencodeWritesOutOfWorktree(worktreeDir: string): Promise<WorktreeGuardResult> {
  // The worktree is hostile input: hardened git on Forge's own git dir (issue 26).
  const git = createGitRunner({ worktreeTarget: createWorktreeGitDirs().targetFor });
  const listed = await git.run(worktreeDir, ['ls-files', '-z', '--', ...CONFIG_FILES, ...OPENCODE_FOLDER_FILES]);
  // Not a git work tree: nothing can be committed by mistake, so nothing to protect.
  if (listed.exitCode !== 0 && /not a git repository/i.test(listed.stderr)) return { protectedFiles: [] };
  if (listed.exitCode !== 0) throw new Error(`git ls-files failed in ${worktreeDir}: ${listed.stderr.trim()}`);
  const stdout = listed.stdout;
  const tracked = stdout.split('\0').filter(Boolean);
  const toProtect: string[] = [];
  for (const file of tracked) {
    if (OPENCODE_FOLDER_FILES.includes(file)) {
      toProtect.push(file);
      continue;
    }
    const text = await readFile(join(worktreeDir, file), 'utf8').catch(() => '');
    if (!/"\$schema"\s*:/.test(text)) toProtect.push(file);
  }
  if (toProtect.length > 0) {
    await git.ok(worktreeDir, ['update-index', '--skip-worktree', '--', ...toProtect]);
  }
  return { protectedFiles: toProtect };
}
