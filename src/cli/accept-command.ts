/**
 * `forge accept NAME [--squash | --merge-commit] [--remove]` and `forge accept NAME --push
 * REMOTE` (issue 29 item 4): the loop's work merged into the branch it started from, or its
 * branch pushed with the user's own git; refusals are one line and change nothing.
 */
import type { ForgeEngine } from '../core/engine';
import type { ForgeSettings } from '../core/config/settings';
import { LoopRuntimeError } from '../core/loop/runtime-types';
import { acceptLoop, osUser, pushLoop, removeAcceptedLoop, removeCommandOf, userGit } from '../core/accept/accept-loop';
import { chooseAcceptStrategy } from '../core/accept/accept-decisions';
import { EXIT, UsageError, type CliCommand } from './args';

export async function runAcceptCommand(
  engine: ForgeEngine,
  cmd: Extract<CliCommand, { command: 'accept' }>,
  settings: ForgeSettings,
  io: { out: (line: string) => void; err: (line: string) => void },
): Promise<number> {
  const { projectId } = await engine.runtime.projectOf(cmd.repo);
  const loop = engine.runtime.get({ projectId, name: cmd.name });
  if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${cmd.name}" in this repository. "forge status" lists them.`);
  const deps = { repos: engine.repos, worktrees: engine.worktrees, user: osUser() };
  if (cmd.push !== null) {
    const pushed = await pushLoop(deps, userGit(), loop, cmd.push);
    if (pushed.kind !== 'accepted') {
      io.err(`forge: ${pushed.message}`);
      return EXIT.badInput;
    }
    io.out(cmd.json ? JSON.stringify({ loop: loop.name, how: 'push', remote: cmd.push, branch: loop.branch, commit: pushed.record.commit, url: pushed.url ?? null }) : pushed.message);
    return EXIT.completed;
  }
  const strategy = chooseAcceptStrategy(settings['forge.accept.strategy'], { squash: cmd.squash, mergeCommit: cmd.mergeCommit });
  if (strategy === null) throw new UsageError('--squash and --merge-commit exclude each other: pick one.');
  const accepted = await acceptLoop(deps, loop, strategy);
  if (accepted.kind === 'refused') {
    io.err(`forge: ${accepted.message}`);
    return EXIT.badInput;
  }
  if (accepted.kind === 'already' && !cmd.json) io.out(accepted.message);
  let removed = false;
  if (cmd.remove) {
    await removeAcceptedLoop(deps, loop);
    removed = true;
  }
  if (cmd.json) {
    const record = accepted.kind === 'accepted' ? accepted.record : null;
    io.out(JSON.stringify({ loop: loop.name, how: record?.how ?? 'already', into: loop.baseBranch, commit: record?.commit ?? null, removed }));
  } else {
    if (accepted.kind === 'accepted') io.out(accepted.message);
    io.out(removed ? `Removed the worktree and the branch ${loop.branch}.` : `The worktree and the branch ${loop.branch} are kept; remove them with: ${removeCommandOf(loop)}`);
  }
  return EXIT.completed;
}
